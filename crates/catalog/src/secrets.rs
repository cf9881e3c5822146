//! Encryption of secret values at rest: ChaCha20-Poly1305 with a random
//! 96-bit nonce per value, the owning object's id and slot as associated data
//! (so a ciphertext cannot be moved to another secret), and a 256-bit key kept
//! in its own file (mode 0600) in the data directory.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};

use crate::CatalogError;

const KEY_FILE: &str = "secrets.key";
const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 12;

/// The key that encrypts secret values.
pub struct SecretsKey {
    cipher: ChaCha20Poly1305,
}

impl std::fmt::Debug for SecretsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretsKey(********)")
    }
}

impl SecretsKey {
    /// Reads the key file of `data_dir`, creating it (mode 0600) if absent.
    pub fn load_or_create(data_dir: &Path) -> Result<SecretsKey, CatalogError> {
        let path = data_dir.join(KEY_FILE);
        let mut bytes = Vec::new();
        match OpenOptions::new().read(true).open(&path) {
            Ok(mut file) => {
                file.read_to_end(&mut bytes)
                    .map_err(|e| CatalogError::io(&path, e))?;
                if bytes.len() != KEY_LEN {
                    return Err(CatalogError::Corrupt(format!(
                        "{} holds {} bytes, expected {KEY_LEN}",
                        path.display(),
                        bytes.len()
                    )));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bytes = rand::random::<[u8; KEY_LEN]>().to_vec();
                let temporary = data_dir.join(format!("{KEY_FILE}.tmp"));
                let mut file = OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&temporary)
                    .map_err(|e| CatalogError::io(&temporary, e))?;
                file.write_all(&bytes)
                    .map_err(|e| CatalogError::io(&temporary, e))?;
                file.sync_all()
                    .map_err(|e| CatalogError::io(&temporary, e))?;
                // Rename makes the key appear whole or not at all.
                std::fs::rename(&temporary, &path).map_err(|e| CatalogError::io(&path, e))?;
                if let Ok(dir) = std::fs::File::open(data_dir) {
                    let _ = dir.sync_all();
                }
            }
            Err(e) => return Err(CatalogError::io(&path, e)),
        }
        let key = Key::from_slice(&bytes);
        Ok(SecretsKey {
            cipher: ChaCha20Poly1305::new(key),
        })
    }

    /// Encrypts `value`; returns nonce and ciphertext.
    pub fn encrypt(
        &self,
        associated: &str,
        value: &str,
    ) -> Result<(Vec<u8>, Vec<u8>), CatalogError> {
        let nonce_bytes = rand::random::<[u8; NONCE_LEN]>();
        let ciphertext = self
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce_bytes),
                Payload {
                    msg: value.as_bytes(),
                    aad: associated.as_bytes(),
                },
            )
            .map_err(|_| CatalogError::internal("secret encryption failed"))?;
        Ok((nonce_bytes.to_vec(), ciphertext))
    }

    /// Decrypts a value written by [`SecretsKey::encrypt`] for the same
    /// associated data.
    pub fn decrypt(
        &self,
        associated: &str,
        nonce: &[u8],
        ciphertext: &[u8],
    ) -> Result<String, CatalogError> {
        if nonce.len() != NONCE_LEN {
            return Err(CatalogError::Corrupt(format!(
                "secret {associated} has a bad nonce"
            )));
        }
        let plaintext = self
            .cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: associated.as_bytes(),
                },
            )
            .map_err(|_| {
                CatalogError::Corrupt(format!(
                    "secret {associated} cannot be decrypted with this data directory's key"
                ))
            })?;
        String::from_utf8(plaintext)
            .map_err(|_| CatalogError::Corrupt(format!("secret {associated} is not UTF-8")))
    }
}
