// OAuth2 client-credentials server for tests, built on oauth2-mock-server@8.
//
// Usage: node oauth_server.mjs CONFIG.json
//   CONFIG: {"port": N, "token_path": "/oidc/v1/token", "clients": {"id": "secret"},
//            "token_ttl": 3600, "module": "<path to oauth2-mock-server/dist/index.mjs>"}
//
// The token endpoint (on token_path) accepts client credentials in the form body or as
// HTTP Basic; an unknown client or a wrong secret gets 401 invalid_client. Issued JWTs
// (RS256) and `expires_in` use the configured lifetime. Test control endpoints:
//   GET  /_testkit/grants            every token request: client_id, scope, granted, error
//   POST /_testkit/token-ttl?seconds=N  lifetime of tokens issued from now on
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const cfg = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const { OAuth2Server } = await import(pathToFileURL(cfg.module).href);

let tokenTtl = cfg.token_ttl ?? 3600;
const grants = [];

const server = new OAuth2Server(undefined, undefined, {
  endpoints: { token: cfg.token_path ?? '/token' },
});
await server.issuer.keys.generate('RS256');

function clientCredentials(req) {
  const auth = req.headers.authorization ?? '';
  if (auth.toLowerCase().startsWith('basic ')) {
    const decoded = Buffer.from(auth.slice(6).trim(), 'base64').toString('utf8');
    const i = decoded.indexOf(':');
    if (i >= 0) {
      return {
        id: decodeURIComponent(decoded.slice(0, i)),
        secret: decodeURIComponent(decoded.slice(i + 1)),
        via: 'basic',
      };
    }
  }
  const body = req.body ?? {};
  return { id: body.client_id, secret: body.client_secret, via: 'body' };
}

server.service.on('beforeTokenSigning', (token) => {
  const now = Math.floor(Date.now() / 1000);
  token.payload.iat = now;
  token.payload.exp = now + tokenTtl;
});

server.service.on('beforeResponse', (response, req) => {
  const creds = clientCredentials(req);
  const body = req.body ?? {};
  const grant = {
    client_id: creds.id ?? null,
    scope: body.scope ?? null,
    grant_type: body.grant_type ?? null,
    auth: creds.via,
    granted: false,
  };
  const known = Object.prototype.hasOwnProperty.call(cfg.clients, creds.id ?? '');
  if (!known || cfg.clients[creds.id] !== creds.secret) {
    response.statusCode = 401;
    response.body = { error: 'invalid_client', error_description: 'Client authentication failed' };
    grant.error = 'invalid_client';
  } else if (response.statusCode === 200) {
    response.body.expires_in = tokenTtl;
    grant.granted = true;
    grant.expires_in = tokenTtl;
  } else {
    grant.error = response.body?.error ?? `status ${response.statusCode}`;
  }
  grants.push(grant);
});

const handler = server.service.requestHandler;
const http_server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://127.0.0.1');
  if (url.pathname === '/_testkit/grants') {
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify(grants));
    return;
  }
  if (url.pathname === '/_testkit/token-ttl' && req.method === 'POST') {
    tokenTtl = Number(url.searchParams.get('seconds'));
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ token_ttl: tokenTtl }));
    return;
  }
  handler(req, res);
});

http_server.listen(cfg.port, '127.0.0.1', () => {
  server.issuer.url = `http://127.0.0.1:${cfg.port}`;
  console.error(`oauth2 server listening on 127.0.0.1:${cfg.port}, token path ${cfg.token_path}`);
});
