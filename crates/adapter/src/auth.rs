//! Who may connect: the server's authentication method, passwords kept only as
//! SCRAM-SHA-256 verifiers, and the slowing down of repeated failed logins.
//!
//! The wire (`floe-pgwire`) and the internal HTTP server (`floe-http`) both ask the
//! same [`Authenticator`], so a password works, fails and is throttled the same way
//! on both. Verifiers come from a [`VerifierSource`]: today the superuser's (from
//! `FLOE_SUPERUSER_PASSWORD`); roles created with a password keep theirs in the
//! durable catalog in the same text form ([`ScramVerifier`]'s `Display`).

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::rand::{SecureRandom, SystemRandom};
use ring::{digest, hmac, pbkdf2};

/// The superuser, as in Materialize.
pub const SUPERUSER: &str = "materialize";

/// PBKDF2 iterations of new verifiers: PostgreSQL's default (`scram_iterations`).
pub const SCRAM_ITERATIONS: u32 = 4096;

/// How clients prove who they are (`--authenticator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    /// Any client that reaches the port is who it says it is.
    None,
    /// A cleartext password (only over TLS in production), checked against the verifier.
    Password,
    /// SCRAM-SHA-256: the password never crosses the wire.
    Sasl,
}

impl AuthMethod {
    pub fn requires_password(self) -> bool {
        self != AuthMethod::None
    }
}

impl std::str::FromStr for AuthMethod {
    type Err = String;

    fn from_str(text: &str) -> Result<AuthMethod, String> {
        match text.to_ascii_lowercase().as_str() {
            "none" => Ok(AuthMethod::None),
            "password" => Ok(AuthMethod::Password),
            "sasl" => Ok(AuthMethod::Sasl),
            other => Err(format!(
                "invalid authenticator {other:?}: use none, password or sasl"
            )),
        }
    }
}

/// A SCRAM-SHA-256 verifier (RFC 5802/7677): what the server keeps of a password.
/// Its text form is PostgreSQL's `rolpassword`:
/// `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` (base64).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramVerifier {
    pub iterations: u32,
    pub salt: Vec<u8>,
    /// `SHA-256(HMAC(SaltedPassword, "Client Key"))`: checks the client's proof.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`: signs the server's final message.
    pub server_key: Vec<u8>,
}

impl fmt::Debug for ScramVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The keys are as good as the password to an attacker who can run PBKDF2 on them.
        f.debug_struct("ScramVerifier")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for ScramVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SCRAM-SHA-256${}:{}${}:{}",
            self.iterations,
            BASE64.encode(&self.salt),
            BASE64.encode(&self.stored_key),
            BASE64.encode(&self.server_key)
        )
    }
}

impl ScramVerifier {
    /// A verifier of `password` with a new random salt.
    pub fn new(password: &str) -> ScramVerifier {
        let mut salt = vec![0u8; 16];
        // The system's random source failing is not something to go on without.
        if SystemRandom::new().fill(&mut salt).is_err() {
            salt = random_fallback(16);
        }
        ScramVerifier::derive(password, salt, SCRAM_ITERATIONS)
    }

    /// The verifier of `password` with this salt and iteration count.
    pub fn derive(password: &str, salt: Vec<u8>, iterations: u32) -> ScramVerifier {
        let salted = salted_password(password, &salt, iterations);
        let client_key = hmac_sha256(&salted, b"Client Key");
        ScramVerifier {
            iterations,
            stored_key: digest::digest(&digest::SHA256, &client_key)
                .as_ref()
                .to_vec(),
            server_key: hmac_sha256(&salted, b"Server Key"),
            salt,
        }
    }

    /// Parses PostgreSQL's text form; `None` if it is not one.
    pub fn parse(text: &str) -> Option<ScramVerifier> {
        let rest = text.strip_prefix("SCRAM-SHA-256$")?;
        let (parameters, keys) = rest.split_once('$')?;
        let (iterations, salt) = parameters.split_once(':')?;
        let (stored_key, server_key) = keys.split_once(':')?;
        let verifier = ScramVerifier {
            iterations: iterations.parse().ok().filter(|i| *i > 0)?,
            salt: BASE64.decode(salt).ok()?,
            stored_key: BASE64.decode(stored_key).ok()?,
            server_key: BASE64.decode(server_key).ok()?,
        };
        (verifier.stored_key.len() == 32 && verifier.server_key.len() == 32).then_some(verifier)
    }

    /// Whether `password` is the one this verifier was made from (in constant time).
    pub fn matches(&self, password: &str) -> bool {
        let candidate = ScramVerifier::derive(password, self.salt.clone(), self.iterations);
        constant_time_eq(&candidate.stored_key, &self.stored_key)
            & constant_time_eq(&candidate.server_key, &self.server_key)
    }
}

/// Whether two byte strings are equal, in time that depends only on their lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `Hi(Normalize(password), salt, i)` of RFC 5802. A password SASLprep refuses is
/// used as it is, as PostgreSQL does.
fn salted_password(password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    let normalized = stringprep::saslprep(password)
        .map(|p| p.into_owned())
        .unwrap_or_else(|_| password.to_string());
    let mut out = vec![0u8; 32];
    let iterations = NonZeroU32::new(iterations).unwrap_or(NonZeroU32::MIN);
    pbkdf2::derive(
        pbkdf2::PBKDF2_HMAC_SHA256,
        iterations,
        salt,
        normalized.as_bytes(),
        &mut out,
    );
    out
}

fn hmac_sha256(key: &[u8], message: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), message)
        .as_ref()
        .to_vec()
}

/// Bytes from the standard library's randomly keyed hasher, for the unlikely case
/// that the system's random source fails.
fn random_fallback(len: usize) -> Vec<u8> {
    use std::hash::{BuildHasher, Hasher};
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_usize(out.len());
        out.extend_from_slice(&hasher.finish().to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Where login verifiers come from: the superuser's from the environment, roles'
/// from the durable catalog. `None`: the role does not exist, cannot log in, or
/// has no password.
#[async_trait]
pub trait VerifierSource: Send + Sync {
    async fn verifier(&self, role: &str) -> Option<ScramVerifier>;
}

/// The verifier source of a server whose only login is the superuser's.
#[derive(Debug, Default)]
pub struct SuperuserOnly(pub Option<ScramVerifier>);

#[async_trait]
impl VerifierSource for SuperuserOnly {
    async fn verifier(&self, role: &str) -> Option<ScramVerifier> {
        (role == SUPERUSER).then(|| self.0.clone()).flatten()
    }
}

/// The server's authentication: its method, the verifiers, and the failure throttle.
pub struct Authenticator {
    pub method: AuthMethod,
    source: Arc<dyn VerifierSource>,
    throttle: LoginThrottle,
    /// Keys the salts of made-up verifiers for roles that do not exist, so a SCRAM
    /// exchange for an unknown role looks like one for a known role (a stable salt),
    /// and fails only at the proof, like a wrong password.
    mock_key: hmac::Key,
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authenticator")
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    pub fn new(method: AuthMethod, source: Arc<dyn VerifierSource>) -> Authenticator {
        let mut key = [0u8; 32];
        if SystemRandom::new().fill(&mut key).is_err() {
            key.copy_from_slice(&random_fallback(32));
        }
        Authenticator {
            method,
            source,
            throttle: LoginThrottle::default(),
            mock_key: hmac::Key::new(hmac::HMAC_SHA256, &key),
        }
    }

    /// The verifier to run a SCRAM exchange against: the role's, or (for a role that
    /// cannot log in) a made-up one no password matches.
    pub async fn scram_verifier(&self, role: &str) -> ScramVerifier {
        match self.source.verifier(role).await {
            Some(verifier) => verifier,
            None => self.mock_verifier(role),
        }
    }

    fn mock_verifier(&self, role: &str) -> ScramVerifier {
        let tag = hmac::sign(&self.mock_key, role.as_bytes());
        let bytes = tag.as_ref();
        let mut keys = [0u8; 64];
        if SystemRandom::new().fill(&mut keys).is_err() {
            keys.copy_from_slice(&random_fallback(64));
        }
        ScramVerifier {
            iterations: SCRAM_ITERATIONS,
            salt: bytes[..16].to_vec(),
            stored_key: keys[..32].to_vec(),
            server_key: keys[32..].to_vec(),
        }
    }

    /// Checks a cleartext password (the `password` method, HTTP basic authentication).
    /// An unknown role costs the same PBKDF2 work as a known one.
    pub async fn check_password(&self, role: &str, password: &str) -> bool {
        self.scram_verifier(role).await.matches(password)
    }

    /// Records a failed login and waits out its penalty before the caller answers:
    /// each failure in a row for the same role from the same address doubles it.
    pub async fn login_failed(&self, role: &str, peer: IpAddr) {
        let delay = self.throttle.failure(role, peer, Instant::now());
        tracing::info!(role, %peer, delay_ms = delay.as_millis() as u64, "login failed");
        tokio::time::sleep(delay).await;
    }

    /// Records a successful login: the role's failures from this address are forgiven.
    pub fn login_succeeded(&self, role: &str, peer: IpAddr) {
        self.throttle.success(role, peer);
    }

    /// Failed logins since the server started.
    pub fn failures(&self) -> u64 {
        self.throttle.total()
    }
}

/// Failed logins per role and client address, and the delay each earns.
#[derive(Debug, Default)]
pub struct LoginThrottle {
    state: Mutex<ThrottleState>,
}

#[derive(Debug, Default)]
struct ThrottleState {
    recent: HashMap<(String, IpAddr), (u32, Instant)>,
    total: u64,
}

impl LoginThrottle {
    /// The first failure's delay; each further failure in a row doubles it.
    pub const BASE_DELAY: Duration = Duration::from_millis(250);
    /// The longest delay.
    pub const MAX_DELAY: Duration = Duration::from_secs(8);
    /// Failures older than this are forgotten.
    pub const WINDOW: Duration = Duration::from_secs(600);
    /// At most this many (role, address) pairs are remembered; beyond, new pairs
    /// get the longest delay (an attacker spraying names gains nothing).
    pub const CAPACITY: usize = 10_000;

    /// Records a failure at `now` and returns the delay it earns.
    pub fn failure(&self, role: &str, peer: IpAddr, now: Instant) -> Duration {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.total += 1;
        let key = (role.to_string(), peer);
        if !state.recent.contains_key(&key) && state.recent.len() >= Self::CAPACITY {
            state
                .recent
                .retain(|_, (_, at)| now.saturating_duration_since(*at) < Self::WINDOW);
            if state.recent.len() >= Self::CAPACITY {
                return Self::MAX_DELAY;
            }
        }
        let entry = state.recent.entry(key).or_insert((0, now));
        if now.saturating_duration_since(entry.1) >= Self::WINDOW {
            entry.0 = 0;
        }
        entry.0 = entry.0.saturating_add(1);
        entry.1 = now;
        Self::delay(entry.0)
    }

    /// The delay of the `failures`-th failure in a row.
    pub fn delay(failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(16);
        Self::BASE_DELAY
            .saturating_mul(1 << doublings)
            .min(Self::MAX_DELAY)
    }

    pub fn success(&self, role: &str, peer: IpAddr) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.recent.remove(&(role.to_string(), peer));
    }

    pub fn total(&self) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's example: user "user", password "pencil", this salt and 4096 iterations.
    #[test]
    fn verifier_matches_the_rfc_7677_example() {
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let verifier = ScramVerifier::derive("pencil", salt, 4096);
        // ServerSignature in the RFC is HMAC(ServerKey, AuthMessage); check the keys
        // through PostgreSQL's text form computed independently with Python's hashlib.
        assert_eq!(
            verifier.to_string(),
            "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="
        );
        assert!(verifier.matches("pencil"));
        assert!(!verifier.matches("pencil "));
    }

    #[test]
    fn verifiers_round_trip_and_refuse_garbage() {
        let verifier = ScramVerifier::new("s3cret");
        let parsed = ScramVerifier::parse(&verifier.to_string()).unwrap();
        assert_eq!(parsed, verifier);
        assert!(parsed.matches("s3cret"));
        assert!(!parsed.matches("S3cret"));
        for garbage in [
            "",
            "md5abc",
            "SCRAM-SHA-256$",
            "SCRAM-SHA-256$0:AAAA$AAAA:AAAA",
            "SCRAM-SHA-256$4096:!!$AAAA:AAAA",
            "SCRAM-SHA-256$4096:AAAA$AAAA:AAAA",
        ] {
            assert!(ScramVerifier::parse(garbage).is_none(), "{garbage}");
        }
        // Two verifiers of one password differ (random salts).
        assert_ne!(ScramVerifier::new("s3cret"), verifier);
        // Debug output never shows key material.
        assert!(!format!("{verifier:?}").contains(&BASE64.encode(&verifier.stored_key)));
    }

    #[tokio::test]
    async fn unknown_roles_get_a_stable_salt_and_never_match() {
        let source = Arc::new(SuperuserOnly(Some(ScramVerifier::new("pw"))));
        let auth = Authenticator::new(AuthMethod::Sasl, source);
        let first = auth.scram_verifier("nobody").await;
        let second = auth.scram_verifier("nobody").await;
        assert_eq!(first.salt, second.salt);
        assert_eq!(first.iterations, SCRAM_ITERATIONS);
        assert_ne!(auth.scram_verifier("other").await.salt, first.salt);
        assert!(!auth.check_password("nobody", "pw").await);
        assert!(auth.check_password(SUPERUSER, "pw").await);
        assert!(!auth.check_password(SUPERUSER, "wrong").await);
    }

    #[test]
    fn repeated_failures_are_slowed_down_and_success_forgives() {
        let throttle = LoginThrottle::default();
        let peer: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.1".parse().unwrap();
        let now = Instant::now();
        let delays: Vec<Duration> = (0..8)
            .map(|_| throttle.failure("materialize", peer, now))
            .collect();
        assert_eq!(delays[0], LoginThrottle::BASE_DELAY);
        assert_eq!(delays[1], LoginThrottle::BASE_DELAY * 2);
        assert_eq!(delays[2], LoginThrottle::BASE_DELAY * 4);
        assert_eq!(delays[7], LoginThrottle::MAX_DELAY);
        assert!(delays.windows(2).all(|w| w[0] <= w[1]));
        // Another address starts afresh; so does the same one after a success.
        assert_eq!(
            throttle.failure("materialize", other, now),
            LoginThrottle::BASE_DELAY
        );
        throttle.success("materialize", peer);
        assert_eq!(
            throttle.failure("materialize", peer, now),
            LoginThrottle::BASE_DELAY
        );
        // Failures older than the window are forgotten.
        let later = now + LoginThrottle::WINDOW;
        assert_eq!(
            throttle.failure("materialize", other, later),
            LoginThrottle::BASE_DELAY
        );
        assert_eq!(throttle.total(), 11);
    }
}
