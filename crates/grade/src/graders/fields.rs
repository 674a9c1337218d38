//! A case's `expect` object, read with errors that name the field (`expect.needle`), for the
//! builders of every grader.

use crate::error::{bail, Error, Result};
use serde_json::{Map, Value};

/// Typed access to `expect`, with errors that name the field.
pub(crate) struct Fields<'a> {
    pub(crate) expect: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    /// Reads `expect`.
    pub(crate) fn new(expect: &'a Map<String, Value>) -> Self {
        Fields { expect }
    }

    pub(crate) fn only(&self, allowed: &[&str]) -> Result<()> {
        if let Some(unknown) = self.expect.keys().find(|k| !allowed.contains(&k.as_str())) {
            bail!(
                grader,
                "unknown field expect.{unknown} (this grader takes: {})",
                allowed.join(", ")
            );
        }
        Ok(())
    }

    pub(crate) fn string(&self, name: &str) -> Result<String> {
        self.optional_string(name)?
            .ok_or_else(|| Error::grader(format!("missing field expect.{name}")))
    }

    pub(crate) fn optional_string(&self, name: &str) -> Result<Option<String>> {
        match self.expect.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => bail!(grader, "expect.{name} must be a string, found {other}"),
        }
    }

    /// A number from 0 to 1 (a share or a score threshold).
    pub(crate) fn optional_share(&self, name: &str) -> Result<Option<f64>> {
        match self.expect.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_f64() {
                Some(x) if (0.0..=1.0).contains(&x) => Ok(Some(x)),
                _ => bail!(
                    grader,
                    "expect.{name} must be a number from 0 to 1, found {v}"
                ),
            },
        }
    }

    pub(crate) fn optional_count(&self, name: &str, max: u64) -> Result<Option<u64>> {
        match self.expect.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n <= max => Ok(Some(n)),
                _ => bail!(
                    grader,
                    "expect.{name} must be a whole number from 0 to {max}, found {v}"
                ),
            },
        }
    }
}
