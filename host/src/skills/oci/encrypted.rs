//! cosign's encrypted private keys (`cosign generate-key-pair`): a PEM block
//! `ENCRYPTED SIGSTORE PRIVATE KEY` (or the older `ENCRYPTED COSIGN PRIVATE KEY`) holding
//! JSON: the PKCS#8 DER key sealed with NaCl secretbox (XSalsa20-Poly1305) under a key
//! derived by scrypt from the password (`COSIGN_PASSWORD`), with the salt and nonce beside it.

use super::{OciError, Result};
use base64::Engine as _;
use crypto_secretbox::aead::{Aead as _, KeyInit as _};
use p256::pkcs8::DecodePrivateKey as _;
use serde::Deserialize;
use std::path::Path;

/// The variable holding the password, as cosign reads it.
pub const PASSWORD_VAR: &str = "COSIGN_PASSWORD";

#[derive(Deserialize)]
struct Envelope {
    kdf: Kdf,
    cipher: Cipher,
    ciphertext: String,
}

#[derive(Deserialize)]
struct Kdf {
    name: String,
    params: Params,
    salt: String,
}

#[derive(Deserialize)]
struct Params {
    #[serde(rename = "N")]
    n: u64,
    r: u32,
    p: u32,
}

#[derive(Deserialize)]
struct Cipher {
    name: String,
    nonce: String,
}

/// Whether `text` is one of cosign's encrypted keys.
pub fn is_cosign(text: &str) -> bool {
    text.contains("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----")
        || text.contains("-----BEGIN ENCRYPTED COSIGN PRIVATE KEY-----")
}

/// The P-256 key sealed in `text` (the file `path`), opened with `password`.
pub fn open(text: &str, path: &Path, password: &str) -> Result<p256::SecretKey> {
    let bad = |message: String| OciError::Key { path: path.to_path_buf(), message };
    let b64 = |what: &str, text: &str| {
        base64::engine::general_purpose::STANDARD.decode(text.trim()).map_err(|_| bad(format!("{what} is not base64")))
    };
    let body: String = text.lines().filter(|l| !l.starts_with("-----") && !l.trim().is_empty()).collect();
    let envelope: Envelope = serde_json::from_slice(&b64("the PEM block", &body)?)
        .map_err(|e| bad(format!("not a cosign encrypted key: {e}")))?;
    if envelope.kdf.name != "scrypt" || envelope.cipher.name != "nacl/secretbox" {
        return Err(bad(format!("{} + {}: only scrypt + nacl/secretbox", envelope.kdf.name, envelope.cipher.name)));
    }
    let Params { n, r, p } = envelope.kdf.params;
    let log_n = u8::try_from(n.trailing_zeros()).unwrap_or(u8::MAX);
    if !n.is_power_of_two() || log_n > 30 {
        return Err(bad(format!("scrypt N = {n}: a power of two up to 2^30")));
    }
    let params = scrypt::Params::new(log_n, r, p).map_err(|e| bad(format!("scrypt parameters: {e}")))?;
    let mut key = [0u8; 32];
    scrypt::scrypt(password.as_bytes(), &b64("the salt", &envelope.kdf.salt)?, &params, &mut key)
        .map_err(|e| bad(format!("scrypt: {e}")))?;
    let nonce = b64("the nonce", &envelope.cipher.nonce)?;
    if nonce.len() != 24 {
        return Err(bad(format!("a nonce of {} bytes, not 24", nonce.len())));
    }
    let sealed = b64("the ciphertext", &envelope.ciphertext)?;
    let cipher = crypto_secretbox::XSalsa20Poly1305::new(&key.into());
    let der = cipher
        .decrypt(crypto_secretbox::Nonce::from_slice(&nonce), sealed.as_slice())
        .map_err(|_| bad(format!("cannot open it: a wrong {PASSWORD_VAR}, or the file was altered")))?;
    p256::SecretKey::from_pkcs8_der(&der).map_err(|e| bad(format!("not a P-256 key inside: {e}")))
}
