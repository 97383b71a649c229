//! Reading a dump file: the header first, then the whole document.
//!
//! The header goes first so that a file of another kind or version is named as such
//! ("unknown dump format", "unsupported dump version") rather than as a list of
//! fields the format does not have.

use serde::Deserialize;

use super::{Dump, ImportError, FORMAT, VERSION};

/// The two fields read before anything else, so that a file of another kind or
/// version is named as such rather than as a list of unknown fields.
#[derive(Deserialize)]
struct Header {
    format: Option<serde_json::Value>,
    version: Option<serde_json::Value>,
}

/// Reads a dump: the header first, then the whole document, refusing any field this
/// version of the format does not have.
pub fn parse(bytes: &[u8]) -> Result<Dump, ImportError> {
    let header: Header = serde_json::from_slice(bytes).map_err(|e| {
        ImportError::Unreadable(format!("not an allot dump (not a JSON object: {e})"))
    })?;
    match header.format {
        Some(serde_json::Value::String(f)) if f == FORMAT => {}
        Some(other) => {
            return Err(ImportError::Unreadable(format!(
                "unknown dump format {other} (expected \"{FORMAT}\")"
            )))
        }
        None => {
            return Err(ImportError::Unreadable(format!(
                "not an allot dump (no \"format\": \"{FORMAT}\" field)"
            )))
        }
    }
    match header.version {
        Some(v) if v.as_u64() == Some(VERSION) => {}
        Some(v) => {
            return Err(ImportError::Unreadable(format!(
                "unsupported dump version {v} (this allot reads version {VERSION})"
            )))
        }
        None => {
            return Err(ImportError::Unreadable(
                "not an allot dump (no \"version\" field)".into(),
            ))
        }
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ImportError::Unreadable(format!("malformed dump: {e}")))
}
