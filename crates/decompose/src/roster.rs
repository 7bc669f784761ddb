//! The roster: the profiles a decomposed task may be assigned to, the assignee used when
//! the model names none of them, and the cap on children (docs/decomposer.md, docs/config.md).

use board_core::plan::{DEFAULT_MAX_CHILDREN, MAX_CHILDREN_CEILING};

/// The assignee used when `kanban.default_assignee` is unset or blank.
pub const DEFAULT_ASSIGNEE: &str = "default";

/// One worker profile from `profiles:` in the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// The key under `profiles:`, matched exactly against a reply's `assignee`.
    pub name: String,
    /// Shown to the model so it can pick; may be empty.
    pub description: String,
}

impl Profile {
    /// A profile with a name and a description.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Profile {
        Profile {
            name: name.into(),
            description: description.into(),
        }
    }
}

/// What the decomposer knows about who can do work, and how much work one reply may
/// create.
///
/// ```
/// use decompose::{Profile, Roster};
///
/// let roster = Roster::new(vec![Profile::new("coder", "Writes Rust")])
///     .with_default_assignee(Some("coder"))
///     .with_max_children(Some(1000));
/// assert_eq!(roster.default_assignee(), "coder");
/// assert_eq!(roster.max_children(), 64);
/// assert_eq!(roster.resolve_assignee(Some("nobody")), "coder");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roster {
    profiles: Vec<Profile>,
    default_assignee: String,
    max_children: usize,
}

impl Roster {
    /// A roster of `profiles`, with the assignee `default` and the default cap of 16.
    pub fn new(profiles: Vec<Profile>) -> Roster {
        Roster {
            profiles,
            default_assignee: DEFAULT_ASSIGNEE.to_owned(),
            max_children: DEFAULT_MAX_CHILDREN,
        }
    }

    /// Sets `kanban.default_assignee`; unset or blank means `default`.
    pub fn with_default_assignee(mut self, name: Option<&str>) -> Roster {
        self.default_assignee = match name.map(str::trim) {
            Some(name) if !name.is_empty() => name.to_owned(),
            _ => DEFAULT_ASSIGNEE.to_owned(),
        };
        self
    }

    /// Sets `kanban.decompose_max_children`; unset means 16. Clamped to 1..=64 the same
    /// way [`board_core::plan::validate_fanout`] clamps it, so the parser and the commit
    /// agree on the limit.
    pub fn with_max_children(mut self, cap: Option<usize>) -> Roster {
        self.max_children = cap.unwrap_or(DEFAULT_MAX_CHILDREN).clamp(1, MAX_CHILDREN_CEILING);
        self
    }

    /// The configured profiles, in configuration order.
    pub fn profiles(&self) -> &[Profile] {
        &self.profiles
    }

    /// The assignee of every task whose reply names no known profile.
    pub fn default_assignee(&self) -> &str {
        &self.default_assignee
    }

    /// The most children one fan-out may have, already clamped.
    pub fn max_children(&self) -> usize {
        self.max_children
    }

    /// Whether `name` is exactly the name of a configured profile.
    pub fn has_profile(&self, name: &str) -> bool {
        self.profiles.iter().any(|p| p.name == name)
    }

    /// The profile a reply's assignee stands for: the named profile when it exists,
    /// otherwise the default assignee, so no task is ever left unassigned.
    pub fn resolve_assignee(&self, requested: Option<&str>) -> String {
        match requested.map(str::trim) {
            Some(name) if self.has_profile(name) => name.to_owned(),
            _ => self.default_assignee.clone(),
        }
    }
}

impl Default for Roster {
    /// No profiles, assignee `default`, cap 16: the configuration's defaults.
    fn default() -> Roster {
        Roster::new(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_default_assignee_falls_back_to_default() {
        assert_eq!(
            Roster::default()
                .with_default_assignee(Some("  "))
                .default_assignee(),
            "default"
        );
        assert_eq!(
            Roster::default().with_default_assignee(None).default_assignee(),
            "default"
        );
    }

    #[test]
    fn child_cap_is_clamped_like_validate_fanout() {
        assert_eq!(Roster::default().max_children(), 16);
        assert_eq!(Roster::default().with_max_children(None).max_children(), 16);
        assert_eq!(Roster::default().with_max_children(Some(0)).max_children(), 1);
        assert_eq!(Roster::default().with_max_children(Some(65)).max_children(), 64);
        assert_eq!(Roster::default().with_max_children(Some(8)).max_children(), 8);
    }
}
