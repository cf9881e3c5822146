"""Small HTTP fronts that make local peers behave like the real services floe talks to.

Usage: fronts.py unity CONFIG.json
       fronts.py sts CONFIG.json
       fronts.py aws CONFIG.json

unity: a Unity-Catalog-shaped Iceberg REST front for SeaweedFS's catalog.
  - POST /oidc/v1/token: OAuth2 client credentials (form body or HTTP Basic). Only the
    scope `all-apis` is granted (anything else: 400 invalid_scope); a wrong client id or
    secret: 401 invalid_client. Tokens are the front's own, with a lifetime the test sets.
  - /api/2.1/unity-catalog/iceberg-rest/v1/config?warehouse=<catalog name> answers
    overrides.prefix = catalogs/<name>; routes /api/2.1/unity-catalog/iceberg-rest/v1/
    catalogs/<name>/... are forwarded to SeaweedFS /v1/<table bucket>/..., authenticated
    with the front's own SeaweedFS token.
  - Vended credentials only: X-Iceberg-Access-Delegation is passed on only when the client
    asked for vended-credentials; otherwise storage credentials are stripped from answers.
  - GET .../namespaces/<ns>/tables/<t>/credentials (the Iceberg REST credentials endpoint,
    which SeaweedFS lacks): answered like Unity Catalog, {"storage-credentials": [...]},
    with fresh credentials the front obtains by a vended loadTable upstream.
  - Short-lived credentials (config "credential_ttl": N seconds): vended credentials are
    declared to expire N seconds after they were handed out (SeaweedFS vends for at least
    900 s) and the front enforces it: their s3.endpoint is the front's own S3 port
    ("s3_port"), which forwards to SeaweedFS's S3 unchanged (Host header included, so
    signatures hold) but refuses keys past their declared expiry with 403 ExpiredToken.
    "omit_credential_expiry": true drops s3.session-token-expires-at-ms from answers.
  - Grants of the metastore and schemas: with external data access disabled
    (POST /_testkit/external-access?enabled=false), every catalog request with a valid
    token is refused with 403 PERMISSION_DENIED naming the cause; so is every request on a
    schema whose EXTERNAL USE SCHEMA grant was revoked
    (POST /_testkit/schema-grant?namespace=NS&granted=false).
  - GET /_testkit/grants, GET /_testkit/requests, GET /_testkit/counters,
    POST /_testkit/token-ttl?seconds=N, POST /_testkit/revoke-tokens (every token issued so
    far then gets 401).

sts: a front for moto's STS that is as strict as AWS about sts:ExternalId: an AssumeRole
  without ExternalId, for a role whose trust policy has a condition on sts:ExternalId, is
  denied with AWS's AccessDenied error (403); everything else is forwarded unchanged
  (Host header included, so SigV4 signatures stay valid), but moto's error answers are
  reshaped as STS's (<ErrorResponse><Error>, not moto's <Errors> wrapper).
  - GET /_testkit/requests: every AssumeRole and AssumeRoleWithWebIdentity seen (form
    parameters without the token, content type, the access key that signed it, verdict).
  - Web identity (EKS): moto cannot take the unsigned AssumeRoleWithWebIdentity AWS takes
    once IAM is enforced, so the front plays the identity provider's part. A token
    registered for a role (POST /_testkit/web-identity {"token", "role_arn"}) is accepted:
    the call goes on to moto signed with the admin keys (config "admin_access_key",
    "admin_secret_key"), and moto hands out a session of that role. Any other token, or a
    signed call, is refused with 400 InvalidIdentityToken, as AWS refuses a token its
    identity provider did not issue.

aws: the AWS side of the S3 Tables document in one endpoint (an AWS connection's ENDPOINT
  serves STS and S3 alike), for SeaweedFS's catalog:
  - STS requests (an Action parameter) go to moto as the sts front sends them: moto checks
    the signature, the caller's IAM policy and the role's trust policy with its
    sts:ExternalId condition, the front denies a missing ExternalId. When moto allows an
    AssumeRole, the session handed back is minted by SeaweedFS's STS instead (an
    AssumeRole of its role "mint.role_arn", signed with its admin keys, same session name
    and duration), so that SeaweedFS's catalog and S3 accept it.
  - Everything else is S3: forwarded to SeaweedFS's S3 unchanged (Host header included).
  - GET /_testkit/requests: every AssumeRole seen, with its verdict and whether it was
    minted.
"""

import base64
import hashlib
import hmac
import http.client
import json
import secrets
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "expect",
}


def forward(upstream, method, path, headers, body, host=None):
    """Sends one request upstream; returns (status, [(header, value)], body)."""
    u = urlsplit(upstream)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        has_host = False
        for k, v in headers:
            if k.lower() in HOP_BY_HOP:
                continue
            if k.lower() == "host":
                if host is not None:
                    continue
                has_host = True
            conn.putheader(k, v)
        if host is not None:
            conn.putheader("Host", host)
        elif not has_host:
            conn.putheader("Host", u.netloc)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        data = resp.read()
        out_headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP]
        return resp.status, out_headers, data
    finally:
        conn.close()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    front = None  # set per server

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.command, self.path.split("?")[0]))

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send(self, status, body, content_type="application/json", headers=()):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        sent_type = False
        for k, v in headers:
            if k.lower() == "content-type":
                sent_type = True
            self.send_header(k, v)
        if not sent_type and content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        body = self.read_body()
        try:
            self.front.handle(self, body)
        except Exception as e:  # never leave the client hanging
            sys.stderr.write("front error: %r\n" % (e,))
            self.send(502, {"error": {"message": "front error: %s" % e, "type": "BadGateway", "code": 502}})

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = handle_any


def basic_credentials(handler):
    auth = handler.headers.get("Authorization", "")
    if auth.lower().startswith("basic "):
        try:
            user, _, pw = base64.b64decode(auth[6:].strip()).decode().partition(":")
            from urllib.parse import unquote

            return unquote(user), unquote(pw)
        except Exception:
            return None
    return None


class UnityFront:
    BASE = "/api/2.1/unity-catalog/iceberg-rest"

    def __init__(self, cfg):
        self.cfg = cfg
        self.lock = threading.Lock()
        self.tokens = {}  # token -> expiry (epoch seconds)
        self.grants = []
        self.requests = []
        self.ttl = int(cfg.get("token_ttl", 3600))
        self.upstream_token = None
        self.credential_ttl = cfg.get("credential_ttl")
        self.vended_keys = {}  # access key id -> declared expiry (epoch seconds)
        self.external_access = True
        self.revoked_schemas = set()
        self.counters = {
            "credentials_served": 0,
            "credentials_vended": 0,
            "s3_requests": 0,
            "s3_expired_refused": 0,
            "permission_denied": 0,
        }

    # -- upstream (SeaweedFS) authentication -------------------------------------------
    def seaweed_token(self, refresh=False):
        with self.lock:
            if self.upstream_token and not refresh:
                return self.upstream_token
        body = urlencode(
            {
                "grant_type": "client_credentials",
                "client_id": self.cfg["upstream_client_id"],
                "client_secret": self.cfg["upstream_client_secret"],
            }
        ).encode()
        status, _, data = forward(
            self.cfg["upstream"],
            "POST",
            "/v1/oauth/tokens",
            [("Content-Type", "application/x-www-form-urlencoded")],
            body,
        )
        if status != 200:
            raise RuntimeError("SeaweedFS refused the front's credentials: %s" % status)
        token = json.loads(data)["access_token"]
        with self.lock:
            self.upstream_token = token
        return token

    # -- request handling ----------------------------------------------------------------
    def handle(self, h, body):
        url = urlsplit(h.path)
        path, query = url.path, parse_qs(url.query)
        if path == "/_testkit/grants":
            with self.lock:
                return h.send(200, list(self.grants))
        if path == "/_testkit/requests":
            with self.lock:
                return h.send(200, list(self.requests))
        if path == "/_testkit/counters":
            with self.lock:
                return h.send(200, dict(self.counters))
        if path == "/_testkit/external-access" and h.command == "POST":
            self.external_access = query["enabled"][0] == "true"
            return h.send(200, {"external_access": self.external_access})
        if path == "/_testkit/schema-grant" and h.command == "POST":
            namespace = query["namespace"][0]
            with self.lock:
                if query["granted"][0] == "true":
                    self.revoked_schemas.discard(namespace)
                else:
                    self.revoked_schemas.add(namespace)
            return h.send(200, {"namespace": namespace})
        if path == "/_testkit/token-ttl" and h.command == "POST":
            self.ttl = int(query["seconds"][0])
            return h.send(200, {"token_ttl": self.ttl})
        if path == "/_testkit/revoke-tokens" and h.command == "POST":
            with self.lock:
                revoked = len(self.tokens)
                self.tokens.clear()
            return h.send(200, {"revoked": revoked})
        if path == "/oidc/v1/token":
            return self.token(h, body)
        if path.startswith(self.BASE + "/"):
            return self.catalog(h, path[len(self.BASE) :], url.query, body)
        return h.send(404, {"error_code": "ENDPOINT_NOT_FOUND", "message": "No API found for '%s'" % path})

    def token(self, h, body):
        if h.command != "POST":
            return h.send(405, {"error": "invalid_request"})
        form = {k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}
        creds = basic_credentials(h) or (form.get("client_id"), form.get("client_secret"))
        client_id, secret = creds
        scope = form.get("scope")
        grant = {"client_id": client_id, "scope": scope, "grant_type": form.get("grant_type"), "granted": False}

        def refuse(status, error, desc):
            grant["error"] = error
            with self.lock:
                self.grants.append(grant)
            return h.send(status, {"error": error, "error_description": desc})

        if client_id != self.cfg["client_id"] or not secrets.compare_digest(
            (secret or "").encode(), self.cfg["client_secret"].encode()
        ):
            return refuse(401, "invalid_client", "Client authentication failed")
        if form.get("grant_type") != "client_credentials":
            return refuse(400, "unsupported_grant_type", "Only client_credentials is supported")
        if scope is None or scope.split() != ["all-apis"]:
            return refuse(400, "invalid_scope", "The requested scope is invalid: %r" % (scope,))
        token = "uc-" + secrets.token_hex(24)
        ttl = self.ttl
        grant["granted"] = True
        grant["expires_in"] = ttl
        with self.lock:
            self.tokens[token] = time.time() + ttl
            self.grants.append(grant)
        return h.send(200, {"access_token": token, "token_type": "Bearer", "expires_in": ttl, "scope": "all-apis"})

    def authorized(self, h):
        auth = h.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            return False
        with self.lock:
            exp = self.tokens.get(auth[7:].strip())
        return exp is not None and exp > time.time()

    def catalog(self, h, rest, query, body):
        delegation = h.headers.get("X-Iceberg-Access-Delegation")
        vended = delegation is not None and "vended-credentials" in delegation
        with self.lock:
            self.requests.append(
                {"method": h.command, "path": rest, "access_delegation": delegation}
            )
        if not self.authorized(h):
            return h.send(
                401,
                {"error": {"message": "Invalid or expired access token", "type": "NotAuthorizedException", "code": 401}},
            )
        if not self.external_access:
            return self.refuse_permission(
                "PERMISSION_DENIED: External data access is not enabled for metastore '%s'." % self.cfg.get("metastore_id", "metastore-1")
            )(h)
        if rest == "/v1/config":
            warehouse = parse_qs(query).get("warehouse", [None])[0]
            if warehouse not in self.cfg["catalogs"]:
                return h.send(
                    404,
                    {
                        "error": {
                            "message": "Catalog '%s' does not exist." % warehouse,
                            "type": "NoSuchCatalogException",
                            "code": 404,
                        }
                    },
                )
            return h.send(200, {"defaults": {}, "overrides": {"prefix": "catalogs/%s" % warehouse}})
        parts = rest.split("/")
        # ['', 'v1', 'catalogs', name, ...]
        if len(parts) < 5 or parts[1] != "v1" or parts[2] != "catalogs" or parts[3] not in self.cfg["catalogs"]:
            return h.send(404, {"error": {"message": "No route for %s" % rest, "type": "NotFoundException", "code": 404}})
        denied = self.permission_denied(parts[3], parts)
        if denied is not None:
            return denied(h)
        bucket = self.cfg["catalogs"][parts[3]]
        headers = [
            (k, v)
            for k, v in h.headers.items()
            if k.lower() not in ("authorization", "host", "x-iceberg-access-delegation")
        ]
        # .../namespaces/<ns>/tables/<t>/credentials: fresh credentials from a vended loadTable.
        if len(parts) == 9 and parts[4] == "namespaces" and parts[6] == "tables" and parts[8] == "credentials":
            if h.command != "GET":
                return h.send(405, {"error": {"message": "Method not allowed", "type": "MethodNotAllowed", "code": 405}})
            table_path = "/v1/%s/%s" % (bucket, "/".join(parts[4:8]))
            status, rheaders, data = self.upstream(
                "GET", table_path, headers + [("X-Iceberg-Access-Delegation", "vended-credentials")], b""
            )
            if status != 200:
                return h.send(status, data, content_type=None, headers=rheaders)
            doc = json.loads(data)
            credentials = doc.get("storage-credentials") or []
            if not credentials and "s3.access-key-id" in doc.get("config", {}):
                credentials = [{"prefix": doc["metadata"]["location"], "config": doc["config"]}]
            answer = self.declare_lifetimes({"storage-credentials": credentials})
            with self.lock:
                self.counters["credentials_served"] += 1
            return h.send(200, answer)
        upstream_path = "/v1/" + bucket + "/" + "/".join(parts[4:])
        if query:
            upstream_path += "?" + query
        if vended:
            headers.append(("X-Iceberg-Access-Delegation", "vended-credentials"))
        status, rheaders, data = self.upstream(h.command, upstream_path, headers, body)
        if not vended:
            data = strip_credentials(data)
        elif status == 200:
            try:
                doc = json.loads(data)
            except Exception:
                doc = None
            if isinstance(doc, dict) and ("storage-credentials" in doc or "config" in doc):
                data = json.dumps(self.declare_lifetimes(doc)).encode()
        return h.send(status, data, content_type=None, headers=rheaders)

    def upstream(self, method, path, headers, body):
        """A request to SeaweedFS's catalog with the front's own token (fetched again once on 401)."""
        for attempt in (0, 1):
            token = self.seaweed_token(refresh=attempt == 1)
            status, rheaders, data = forward(
                self.cfg["upstream"], method, path, headers + [("Authorization", "Bearer " + token)], body
            )
            if status != 401:
                break
        return status, rheaders, data

    def permission_denied(self, catalog, parts):
        """The refusal of a request on a schema whose EXTERNAL USE SCHEMA grant was revoked."""
        if len(parts) > 5 and parts[4] == "namespaces":
            with self.lock:
                revoked = parts[5] in self.revoked_schemas
            if revoked:
                return self.refuse_permission(
                    "PERMISSION_DENIED: User does not have EXTERNAL USE SCHEMA on Schema '%s.%s'." % (catalog, parts[5])
                )
        return None

    def refuse_permission(self, message):
        with self.lock:
            self.counters["permission_denied"] += 1
        return lambda h: h.send(403, {"error": {"message": message, "type": "PermissionDeniedException", "code": 403}})

    def declare_lifetimes(self, doc):
        """Counts the vended credentials of an answer; with a credential_ttl, declares them to
        expire that soon and points their endpoint at the front's S3 port, which enforces it."""
        configs = [c.get("config", {}) for c in doc.get("storage-credentials") or []]
        if isinstance(doc.get("config"), dict):
            configs.append(doc["config"])
        configs = [c for c in configs if "s3.access-key-id" in c]
        now = time.time()
        with self.lock:
            if configs:
                self.counters["credentials_vended"] += 1
            for config in configs:
                if self.credential_ttl is not None:
                    expires = now + float(self.credential_ttl)
                    self.vended_keys[config["s3.access-key-id"]] = expires
                    config["s3.session-token-expires-at-ms"] = str(int(expires * 1000))
                    config["s3.endpoint"] = "http://127.0.0.1:%d" % int(self.cfg["s3_port"])
                if self.cfg.get("omit_credential_expiry"):
                    config.pop("s3.session-token-expires-at-ms", None)
        return doc

    # -- S3 front (short-lived credentials) -----------------------------------------------
    def handle_s3(self, h, body):
        with self.lock:
            self.counters["s3_requests"] += 1
        key = s3_access_key(h)
        with self.lock:
            expires = self.vended_keys.get(key)
        if expires is not None and expires <= time.time():
            with self.lock:
                self.counters["s3_expired_refused"] += 1
            return h.send(
                403,
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>ExpiredToken</Code>"
                "<Message>The provided token has expired.</Message></Error>",
                content_type="application/xml",
            )
        if h.command == "HEAD":
            return send_head(h, self.cfg["s3_upstream"], h.path, list(h.headers.items()))
        status, rheaders, data = forward(self.cfg["s3_upstream"], h.command, h.path, list(h.headers.items()), body)
        return h.send(status, data, content_type=None, headers=rheaders)


def s3_access_key(h):
    """The access key id a SigV4 request was signed with (header or presigned query)."""
    auth = h.headers.get("Authorization", "")
    marker = "Credential="
    if marker in auth:
        return auth.split(marker, 1)[1].split("/", 1)[0]
    credential = parse_qs(urlsplit(h.path).query).get("X-Amz-Credential")
    if credential:
        return credential[0].split("/", 1)[0]
    return None


def send_head(h, upstream, path, headers):
    """Forwards a HEAD and answers with the upstream's headers, Content-Length included (it
    is the object's size, not the empty body's)."""
    u = urlsplit(upstream)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        conn.putrequest("HEAD", path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers:
            if k.lower() not in HOP_BY_HOP:
                conn.putheader(k, v)
        conn.endheaders()
        resp = conn.getresponse()
        resp.read()
        h.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in HOP_BY_HOP or k.lower() == "content-length":
                h.send_header(k, v)
        h.end_headers()
    finally:
        conn.close()


CREDENTIAL_KEYS = (
    "s3.access-key-id",
    "s3.secret-access-key",
    "s3.session-token",
    "s3.session-token-expires-at-ms",
)


def strip_credentials(data):
    try:
        doc = json.loads(data)
    except Exception:
        return data
    if not isinstance(doc, dict):
        return data
    changed = False
    cfg = doc.get("config")
    if isinstance(cfg, dict):
        for k in list(cfg):
            if k in CREDENTIAL_KEYS:
                del cfg[k]
                changed = True
    if "storage-credentials" in doc:
        del doc["storage-credentials"]
        changed = True
    return json.dumps(doc).encode() if changed else data


class StsFront:
    def __init__(self, cfg):
        self.cfg = cfg
        self.lock = threading.Lock()
        self.requests = []
        # Web identity tokens the test registered: token -> role ARN.
        self.web_identities = {}

    def trust_policy(self, role_arn):
        status, _, data = forward(self.cfg["upstream"], "GET", "/moto-api/data.json", [], b"")
        if status != 200:
            return None
        for role in json.loads(data).get("iam", {}).get("Role", []):
            if role.get("arn") == role_arn:
                doc = role.get("assume_role_policy_document")
                return json.loads(doc) if isinstance(doc, str) else doc
        return None

    @staticmethod
    def requires_external_id(policy):
        statements = policy.get("Statement", [])
        if isinstance(statements, dict):
            statements = [statements]
        for st in statements:
            if st.get("Effect") != "Allow":
                continue
            for _op, conds in (st.get("Condition") or {}).items():
                if any(k.lower() == "sts:externalid" for k in conds):
                    return True
        return False

    @staticmethod
    def params(h, url, body):
        """The request's parameters: its query, and a form body."""
        params = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        ctype = h.headers.get("Content-Type", "")
        if h.command == "POST" and ctype.startswith("application/x-www-form-urlencoded"):
            params.update({k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()})
        return params

    def check_assume_role(self, h, params):
        """Records an AssumeRole; returns the record, with denied_by_front set when the role
        requires an external id and none was sent."""
        record = {
            "method": h.command,
            "content_type": h.headers.get("Content-Type", ""),
            "params": {k: v for k, v in params.items() if k not in ("Policy",)},
            "signed": h.headers.get("Authorization", "").startswith("AWS4-HMAC-SHA256"),
            "access_key_id": signing_access_key(h),
            "denied_by_front": False,
        }
        if "ExternalId" not in params:
            policy = self.trust_policy(params.get("RoleArn", ""))
            if policy is not None and self.requires_external_id(policy):
                record["denied_by_front"] = True
        with self.lock:
            self.requests.append(record)
        return record

    def forward_upstream(self, h, body):
        status, rheaders, data = forward(self.cfg["upstream"], h.command, h.path, list(h.headers.items()), body)
        return status, rheaders, as_sts_error(status, data)

    def handle(self, h, body):
        url = urlsplit(h.path)
        if url.path == "/_testkit/requests":
            with self.lock:
                return h.send(200, list(self.requests))
        if url.path == "/_testkit/web-identity" and h.command == "POST":
            doc = json.loads(body or b"{}")
            with self.lock:
                self.web_identities[doc["token"]] = doc["role_arn"]
            return h.send(200, {"registered": doc["role_arn"]})
        params = self.params(h, url, body)
        if params.get("Action") == "AssumeRoleWithWebIdentity":
            return self.web_identity(h, params)
        if params.get("Action") == "AssumeRole":
            if self.check_assume_role(h, params)["denied_by_front"]:
                return h.send(403, access_denied(params.get("RoleArn", "")), content_type="text/xml")
        status, rheaders, data = self.forward_upstream(h, body)
        return h.send(status, data, content_type=None, headers=rheaders)

    def web_identity(self, h, params):
        """AssumeRoleWithWebIdentity: a registered token for its role goes on to moto, signed."""
        token = params.get("WebIdentityToken", "")
        role_arn = params.get("RoleArn", "")
        signed = "Authorization" in h.headers
        with self.lock:
            accepted = not signed and self.web_identities.get(token) == role_arn
            self.requests.append({
                "method": h.command,
                "content_type": h.headers.get("Content-Type", ""),
                "params": {k: v for k, v in params.items() if k not in ("WebIdentityToken", "Policy")},
                "signed": signed,
                "access_key_id": None,
                "token_accepted": accepted,
                "denied_by_front": not accepted,
            })
        if not accepted:
            return h.send(400, invalid_identity_token(), content_type="text/xml")
        body = urlencode(params).encode()
        upstream = self.cfg["upstream"]
        headers = sigv4_headers(
            "POST", upstream, body, self.cfg["admin_access_key"], self.cfg["admin_secret_key"], "us-east-1", "sts"
        )
        status, rheaders, data = forward(upstream, "POST", "/", headers, body)
        return h.send(status, as_sts_error(status, data), content_type=None, headers=rheaders)


class AwsFront(StsFront):
    """STS (moto decides, SeaweedFS mints the session) and SeaweedFS's S3 on one port."""

    def handle(self, h, body):
        url = urlsplit(h.path)
        if url.path == "/_testkit/requests":
            with self.lock:
                return h.send(200, list(self.requests))
        params = self.params(h, url, body)
        if "Action" not in params:
            status, rheaders, data = forward(self.cfg["s3_upstream"], h.command, h.path, list(h.headers.items()), body)
            return h.send(status, data, content_type=None, headers=rheaders)
        if params["Action"] != "AssumeRole":
            status, rheaders, data = self.forward_upstream(h, body)
            return h.send(status, data, content_type=None, headers=rheaders)
        record = self.check_assume_role(h, params)
        if record["denied_by_front"]:
            return h.send(403, access_denied(params.get("RoleArn", "")), content_type="text/xml")
        status, rheaders, data = self.forward_upstream(h, body)
        if status != 200:
            return h.send(status, data, content_type=None, headers=rheaders)
        status, rheaders, data = self.mint(params)
        with self.lock:
            record["minted"] = status == 200
        return h.send(status, data, content_type=None, headers=rheaders)

    def mint(self, params):
        """A session of SeaweedFS's role, asked for like the one moto allowed."""
        mint = self.cfg["mint"]
        form = {
            "Action": "AssumeRole",
            "Version": "2011-06-15",
            "RoleArn": mint["role_arn"],
            "RoleSessionName": params.get("RoleSessionName", "floe"),
            "DurationSeconds": params.get("DurationSeconds", "3600"),
        }
        body = urlencode(form).encode()
        headers = sigv4_headers(
            "POST", mint["endpoint"], body, mint["access_key"], mint["secret_key"], mint["region"], "sts"
        )
        return forward(mint["endpoint"], "POST", "/", headers, body)


def sigv4_headers(method, endpoint, body, access_key, secret_key, region, service):
    """The headers of a SigV4-signed form request to `endpoint` (path `/`, no query)."""
    amz_date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    payload_hash = hashlib.sha256(body).hexdigest()
    headers = {
        "content-type": "application/x-www-form-urlencoded",
        "host": urlsplit(endpoint).netloc,
        "x-amz-content-sha256": payload_hash,
        "x-amz-date": amz_date,
    }
    names = sorted(headers)
    signed = ";".join(names)
    canonical = "\n".join(
        [method, "/", "", "".join("%s:%s\n" % (k, headers[k]) for k in names), signed, payload_hash]
    )
    scope = "%s/%s/%s/aws4_request" % (amz_date[:8], region, service)
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + secret_key).encode()
    for part in (amz_date[:8], region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    authorization = "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s" % (
        access_key,
        scope,
        signed,
        signature,
    )
    return list(headers.items()) + [("Authorization", authorization)]


def as_sts_error(status, data):
    """An error answer of moto in STS's shape: moto wraps its authorization errors in
    <Errors> (EC2's shape), where STS answers <ErrorResponse><Error> (the SDK then finds
    no error code)."""
    if status < 400:
        return data
    return data.replace(b"<Errors>", b"").replace(b"</Errors>", b"")


def signing_access_key(h):
    """The access key id of a SigV4 Authorization header, if any."""
    auth = h.headers.get("Authorization", "")
    if "Credential=" not in auth:
        return None
    return auth.split("Credential=", 1)[1].split("/", 1)[0]


def invalid_identity_token():
    return (
        '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">\n'
        "  <Error>\n"
        "    <Type>Sender</Type>\n"
        "    <Code>InvalidIdentityToken</Code>\n"
        "    <Message>The web identity token was not issued by a trusted identity provider</Message>\n"
        "  </Error>\n"
        "  <RequestId>%s</RequestId>\n"
        "</ErrorResponse>\n" % uuid.uuid4()
    )


def access_denied(role_arn):
    return (
        '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">\n'
        "  <Error>\n"
        "    <Type>Sender</Type>\n"
        "    <Code>AccessDenied</Code>\n"
        "    <Message>User is not authorized to perform: sts:AssumeRole on resource: %s</Message>\n"
        "  </Error>\n"
        "  <RequestId>%s</RequestId>\n"
        "</ErrorResponse>\n" % (role_arn, uuid.uuid4())
    )


class S3Front:
    """The Unity front's S3 port: requests go to UnityFront.handle_s3."""

    def __init__(self, unity):
        self.unity = unity

    def handle(self, h, body):
        return self.unity.handle_s3(h, body)


def main():
    kind, cfg_path = sys.argv[1], sys.argv[2]
    with open(cfg_path) as f:
        cfg = json.load(f)
    front = {"unity": UnityFront, "sts": StsFront, "aws": AwsFront}[kind](cfg)
    if kind == "unity" and cfg.get("s3_port"):
        s3_handler = type("S3FrontHandler", (Handler,), {"front": S3Front(front)})
        s3_server = ThreadingHTTPServer(("127.0.0.1", int(cfg["s3_port"])), s3_handler)
        s3_server.daemon_threads = True
        threading.Thread(target=s3_server.serve_forever, daemon=True).start()
    handler = type("FrontHandler", (Handler,), {"front": front})
    server = ThreadingHTTPServer(("127.0.0.1", int(cfg["port"])), handler)
    server.daemon_threads = True
    sys.stderr.write("%s front listening on 127.0.0.1:%s\n" % (kind, cfg["port"]))
    sys.stderr.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
