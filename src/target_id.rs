//! Temporary stand-in for the target-ID parser (replaced by the real module on merge).
#![allow(missing_docs)]

use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FeatureSetting {
    Unsupported,
    Any,
    Off,
    On,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TargetId {
    processor: String,
    sramecc: FeatureSetting,
    xnack: FeatureSetting,
}

#[derive(Debug, thiserror::Error)]
#[error("invalid target ID {0:?}")]
pub struct TargetIdError(pub String);

impl TargetId {
    pub fn parse(s: &str) -> Result<TargetId, TargetIdError> {
        let mut parts = s.split(':');
        let processor = parts.next().unwrap_or("");
        let ok_proc = processor.len() > 3
            && processor.starts_with("gfx")
            && processor[3..].chars().all(|c| c.is_ascii_alphanumeric());
        if !ok_proc {
            return Err(TargetIdError(s.to_owned()));
        }
        let mut t = TargetId {
            processor: processor.to_owned(),
            sramecc: FeatureSetting::Any,
            xnack: FeatureSetting::Any,
        };
        for f in parts {
            let (name, setting) = match f.strip_suffix('+') {
                Some(n) => (n, FeatureSetting::On),
                None => match f.strip_suffix('-') {
                    Some(n) => (n, FeatureSetting::Off),
                    None => return Err(TargetIdError(s.to_owned())),
                },
            };
            match name {
                "sramecc" => t.sramecc = setting,
                "xnack" => t.xnack = setting,
                _ => return Err(TargetIdError(s.to_owned())),
            }
        }
        Ok(t)
    }
    pub fn processor(&self) -> &str {
        &self.processor
    }
    pub fn xnack(&self) -> FeatureSetting {
        self.xnack
    }
    pub fn sramecc(&self) -> FeatureSetting {
        self.sramecc
    }
    pub fn runs_on(&self, device: &TargetId) -> bool {
        let f = |a: FeatureSetting, b: FeatureSetting| a == FeatureSetting::Any || a == b;
        self.processor == device.processor
            && f(self.xnack, device.xnack)
            && f(self.sramecc, device.sramecc)
    }
}

impl fmt::Display for TargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.processor)?;
        for (name, s) in [("sramecc", self.sramecc), ("xnack", self.xnack)] {
            match s {
                FeatureSetting::On => write!(f, ":{name}+")?,
                FeatureSetting::Off => write!(f, ":{name}-")?,
                _ => {}
            }
        }
        Ok(())
    }
}

impl FromStr for TargetId {
    type Err = TargetIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TargetId::parse(s)
    }
}

impl serde::Serialize for TargetId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for TargetId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        TargetId::parse(&s).map_err(serde::de::Error::custom)
    }
}
