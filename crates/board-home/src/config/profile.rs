//! `profiles.<name>`: a kind of worker, what its work must pass, and who reviews it.

use std::fmt;

use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::{Deserialize, Serialize};

use super::{fields, Config, ConfigError, MAX_SPAWN};

/// `profiles.<name>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProfileConfig {
    /// What the profile is for, shown to the decomposer.
    pub description: String,
    /// The worker's argv; `None` makes the profile command-less (never spawned).
    #[serde(deserialize_with = "fields::command")]
    pub command: Option<Vec<String>>,
    /// Variables passed to its workers although their names look secret (`*_KEY`,
    /// `*_TOKEN`, ...); the model key's variable never is. Shown only when set.
    #[serde(
        deserialize_with = "fields::variable_names",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub env_allow: Vec<String>,
    /// Card text may start an argument with `-` (default false: such a spawn is
    /// refused). Shown only when set.
    #[serde(deserialize_with = "fields::flag", skip_serializing_if = "std::ops::Not::not")]
    pub allow_dash_arguments: bool,
    /// The system user its workers run as (with that user's groups); `None` runs them as
    /// the gateway's user. Needs a gateway running as root. Shown only when set.
    #[serde(deserialize_with = "fields::user", skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Commands the gateway runs on a worker's reported work before it counts, each an
    /// argv list (never a shell line built from card text), in the worker's workspace
    /// and as its user. Shown only when set.
    #[serde(deserialize_with = "steps", skip_serializing_if = "Vec::is_empty")]
    pub verify: Vec<Vec<String>>,
    /// `required`: the profile's verified work waits for `reviewer`'s approval.
    #[serde(deserialize_with = "review", skip_serializing_if = "Review::is_optional")]
    pub review: Review,
    /// The profile that reviews this one's work (`review: required`). Shown only when set.
    #[serde(deserialize_with = "optional_name", skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<String>,
    /// What a completion must carry: `evidence` refuses one without `--evidence`; `auto`
    /// completes a task from the worker's exit 0 with output (the output is the result).
    #[serde(deserialize_with = "contract", skip_serializing_if = "Option::is_none")]
    pub contract: Option<Contract>,
    /// Workers of this profile (work and reviews) running at once on this gateway;
    /// unset: only `kanban.max_spawn` bounds them. Shown only when set.
    #[serde(
        deserialize_with = "fields::optional_positive::<_, MAX_SPAWN>",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_concurrent: Option<usize>,
    /// Its work is done by lanes (docs/lanes.md), agents outside the gateway: no gateway
    /// spawns it, and its ready tasks wait for a lane's claim. Shown only when set.
    #[serde(deserialize_with = "fields::flag", skip_serializing_if = "std::ops::Not::not")]
    pub external: bool,
}

/// `profiles.<name>.review`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Review {
    /// Work is done once verified; a worker may still ask for review.
    #[default]
    Optional,
    /// Verified work goes to the profile's `reviewer`.
    Required,
}

impl Review {
    fn is_optional(&self) -> bool {
        *self == Review::Optional
    }
}

/// `profiles.<name>.contract`: Hermes' completion contracts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Contract {
    /// A completion without evidence (`complete --evidence JSON`) is refused.
    Evidence,
    /// A worker that exits 0 with output completes its task, the output its result;
    /// any other exit without a report is a protocol violation.
    Auto,
}

/// A profile that requires review names a reviewer, which is another profile of the
/// config: nobody reviews its own work.
pub(super) fn check_reviews(config: &Config) -> Result<(), ConfigError> {
    for (name, profile) in &config.profiles {
        let key = |field: &str| format!("profiles.{name}.{field}");
        match (&profile.review, &profile.reviewer) {
            (Review::Required, None) => {
                return Err(ConfigError::invalid(
                    &key("reviewer"),
                    "review: required needs a reviewer: PROFILE".to_owned(),
                ))
            }
            (_, Some(reviewer)) if reviewer == name => {
                return Err(ConfigError::invalid(
                    &key("reviewer"),
                    "a profile cannot review its own work; name another profile".to_owned(),
                ))
            }
            (_, Some(reviewer)) if !config.profiles.contains_key(reviewer) => {
                return Err(ConfigError::invalid(
                    &key("reviewer"),
                    format!("{reviewer} is not a profile of this config"),
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// An external profile is served by lanes: it has no command for a gateway to run.
pub(super) fn check_external(config: &Config) -> Result<(), ConfigError> {
    match config
        .profiles
        .iter()
        .find(|(_, p)| p.external && p.command.is_some())
    {
        Some((name, _)) => Err(ConfigError::invalid(
            &format!("profiles.{name}.command"),
            "an external profile is served by lanes and has no command; remove one of them".to_owned(),
        )),
        None => Ok(()),
    }
}

/// `profiles.<name>.verify`: a list of argv lists, each as `command` wants it, and no
/// more of them than the board keeps on a task.
pub fn steps<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Vec<String>>, D::Error> {
    struct Wrapped(Vec<String>);
    impl<'de> Deserialize<'de> for Wrapped {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            fields::command(d).map(|argv| Wrapped(argv.unwrap_or_default()))
        }
    }
    let steps: Vec<Wrapped> = Vec::deserialize(d)?;
    let steps: Vec<Vec<String>> = steps.into_iter().map(|w| w.0).collect();
    board_core::limits::steps("the verifiers", &steps).map_err(|e| de::Error::custom(e.to_string()))?;
    Ok(steps)
}

/// An optional profile name: a non-empty string.
pub fn optional_name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Option::<String>::deserialize(d)? {
        Some(name) if name.trim().is_empty() => Err(de::Error::custom("must not be empty")),
        other => Ok(other),
    }
}

/// A word of a closed set, as `config.yaml` writes it: `words` names each and its value.
fn word<'de, D: Deserializer<'de>, T: Copy>(
    d: D,
    words: &'static [(&'static str, T)],
) -> Result<T, D::Error> {
    struct Choice<T: 'static>(&'static [(&'static str, T)]);
    impl<T: Copy> Visitor<'_> for Choice<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let names: Vec<&str> = self.0.iter().map(|(name, _)| *name).collect();
            write!(f, "one of: {}", names.join(", "))
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<T, E> {
            self.0
                .iter()
                .find(|(name, _)| *name == s)
                .map(|(_, value)| *value)
                .ok_or_else(|| E::invalid_value(Unexpected::Str(s), &self))
        }
    }
    d.deserialize_any(Choice(words))
}

/// `profiles.<name>.review`: `required` or `optional`.
pub fn review<'de, D: Deserializer<'de>>(d: D) -> Result<Review, D::Error> {
    word(
        d,
        &[("optional", Review::Optional), ("required", Review::Required)],
    )
}

/// `profiles.<name>.contract`: `evidence` or `auto`.
pub fn contract<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Contract>, D::Error> {
    word(d, &[("evidence", Contract::Evidence), ("auto", Contract::Auto)]).map(Some)
}

impl ProfileConfig {
    /// Whether this home runs the profile's work: a command the gateway starts, or lanes.
    pub fn runs_here(&self) -> bool {
        self.command.is_some() || self.external
    }
}
