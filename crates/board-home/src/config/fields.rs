//! How each kind of config value is read and shown: the `deserialize_with` and
//! `serialize_with` functions the config's fields name, each with the error wording of
//! the file's contract (`expected a non-negative integer, got "four"`).

use std::collections::BTreeMap;
use std::fmt;

use board_sqlite::Synchronous;
use decompose::endpoint::{check_base_url, redact_url};
use decompose::ApiKey;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Unexpected, Visitor};
use serde::Serializer;

use super::{ProfileConfig, DEFAULT_PROFILE, DEFAULT_PROFILE_DESCRIPTION};

/// Programs whose `-c` argument is code: card text must never be spliced into it.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "busybox",
];
/// Flags after which many interpreters take code to run (`python3 -c`, `node -e`,
/// `perl -e`, `--eval`): card text is never that code.
const CODE_FLAGS: &[&str] = &["-c", "-e", "--eval", "--exec", "--command"];
/// Above this a dispatch interval is a typo.
const MAX_INTERVAL_SECONDS: f64 = 24.0 * 3600.0;

/// An integer in `0..=MAX`.
pub fn non_negative<'de, D: Deserializer<'de>, T: TryFrom<i64>, const MAX: i64>(d: D) -> Result<T, D::Error> {
    bounded(d, 0, MAX)
}

/// An integer in `1..=MAX`.
pub fn positive<'de, D: Deserializer<'de>, T: TryFrom<i64>, const MAX: i64>(d: D) -> Result<T, D::Error> {
    bounded(d, 1, MAX)
}

fn bounded<'de, D: Deserializer<'de>, T: TryFrom<i64>>(d: D, min: i64, max: i64) -> Result<T, D::Error> {
    let n = d.deserialize_any(Bounded { min, max })?;
    T::try_from(n).map_err(|_| de::Error::custom(format!("{n} is out of range")))
}

struct Bounded {
    min: i64,
    max: i64,
}

impl Visitor<'_> for Bounded {
    type Value = i64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.min > 0 {
            "a positive integer"
        } else {
            "a non-negative integer"
        })
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<i64, E> {
        if n < self.min {
            return Err(E::invalid_value(Unexpected::Signed(n), &self));
        }
        if n > self.max {
            return Err(E::custom(format!("{n} is above the ceiling {}", self.max)));
        }
        Ok(n)
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<i64, E> {
        match i64::try_from(n) {
            Ok(n) => self.visit_i64(n),
            Err(_) => Err(E::custom(format!("{n} is above the ceiling {}", self.max))),
        }
    }
}

/// An optional integer in `0..=MAX` (absent: no limit).
pub fn optional_count<'de, D: Deserializer<'de>, const MAX: i64>(d: D) -> Result<Option<i64>, D::Error> {
    bounded(d, 0, MAX).map(Some)
}

/// Text that is not a duration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a duration: {0:?} (expected e.g. 90, 90s, 15m, 2h)")]
pub struct BadDuration(pub String);

/// Parses `90`, `90s`, `15m`, `2h` (and `1d`) into positive seconds: the one way a
/// duration is written, on the command line and in `config.yaml`.
pub fn parse_duration(text: &str) -> Result<i64, BadDuration> {
    let bad = || BadDuration(text.chars().take(80).collect());
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    let n: i64 = digits.parse().map_err(|_| bad())?;
    match n.checked_mul(scale) {
        Some(secs) if secs > 0 => Ok(secs),
        _ => Err(bad()),
    }
}

/// An optional age: positive seconds, or a duration string (`30d`); absent: none.
pub fn optional_age<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    d.deserialize_any(Age).map(Some)
}

struct Age;

impl Visitor<'_> for Age {
    type Value = i64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration such as 90d, 12h or 3600")
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<i64, E> {
        if n <= 0 {
            return Err(E::invalid_value(Unexpected::Signed(n), &self));
        }
        Ok(n)
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<i64, E> {
        i64::try_from(n)
            .map_err(|_| E::invalid_value(Unexpected::Unsigned(n), &self))
            .and_then(|n| self.visit_i64(n))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<i64, E> {
        parse_duration(text).map_err(E::custom)
    }
}

/// An optional amount of money: a finite number, 0 or more (absent: none).
pub fn optional_amount<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    d.deserialize_any(Amount).map(Some)
}

struct Amount;

impl Visitor<'_> for Amount {
    type Value = f64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a non-negative amount")
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<f64, E> {
        self.visit_f64(n as f64)
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<f64, E> {
        self.visit_f64(n as f64)
    }

    fn visit_f64<E: de::Error>(self, amount: f64) -> Result<f64, E> {
        if !amount.is_finite() || amount < 0.0 {
            return Err(E::invalid_value(Unexpected::Float(amount), &self));
        }
        Ok(amount)
    }
}

/// A number of seconds, fractional allowed, greater than 0 and at most a day.
pub fn seconds<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    d.deserialize_any(Seconds)
}

struct Seconds;

impl Visitor<'_> for Seconds {
    type Value = f64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number of seconds")
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<f64, E> {
        self.visit_f64(n as f64)
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<f64, E> {
        self.visit_f64(n as f64)
    }

    fn visit_f64<E: de::Error>(self, seconds: f64) -> Result<f64, E> {
        if !seconds.is_finite() {
            return Err(E::invalid_value(Unexpected::Float(seconds), &self));
        }
        if seconds <= 0.0 {
            return Err(E::custom("must be greater than 0"));
        }
        if seconds > MAX_INTERVAL_SECONDS {
            return Err(E::custom(format!(
                "{seconds} is above the ceiling {MAX_INTERVAL_SECONDS}"
            )));
        }
        Ok(seconds)
    }
}

/// A whole number of seconds shows as an integer (`60`, not `60.0`).
pub fn whole_seconds<S: Serializer>(seconds: &f64, s: S) -> Result<S::Ok, S::Error> {
    if seconds.fract() == 0.0 && seconds.abs() < 1e15 {
        s.serialize_i64(*seconds as i64)
    } else {
        s.serialize_f64(*seconds)
    }
}

/// `true` or `false`, nothing YAML 1.1 would have read as one (`yes`, `1`).
pub fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    struct Flag;
    impl Visitor<'_> for Flag {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("true or false")
        }
        fn visit_bool<E: de::Error>(self, b: bool) -> Result<bool, E> {
            Ok(b)
        }
    }
    d.deserialize_any(Flag)
}

/// A string with something in it.
pub fn non_empty<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if s.trim().is_empty() {
        return Err(de::Error::custom("must not be empty"));
    }
    Ok(s)
}

/// A listening address (`127.0.0.1:9464`, `[::1]:9464`), or empty for none.
pub fn bind<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    let s = s.trim().to_owned();
    if !s.is_empty() && s.parse::<std::net::SocketAddr>().is_err() {
        return Err(de::Error::custom(format!(
            "expected an address and port such as 127.0.0.1:9464, got {s:?}"
        )));
    }
    Ok(s)
}

/// A user of this machine (`profiles.<p>.user`).
pub fn user<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let name = non_empty(d)?;
    crate::Account::lookup(&name).map_err(de::Error::custom)?;
    Ok(Some(name))
}

/// An http(s) URL; whether plain HTTP may go to it is decided once the whole file is
/// read, since `model.allow_insecure_http` may stand anywhere in it.
pub fn url<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    check_base_url(&s, true).map_err(de::Error::custom)?;
    Ok(s)
}

/// [`url`], or empty for "the model's".
pub fn url_or_empty<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if !s.is_empty() {
        check_base_url(&s, true).map_err(de::Error::custom)?;
    }
    Ok(s)
}

/// A URL as shown: its credentials redacted.
pub fn redacted_url<S: Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&redact_url(url))
}

/// A database URL that is not a PostgreSQL one. It never quotes the URL: it may hold the
/// password.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected a postgres://user@host/database URL (the value is not shown: it may hold a password)")]
pub struct BadDatabaseUrl;

/// A PostgreSQL URL.
pub fn check_database_url(url: &str) -> Result<(), BadDatabaseUrl> {
    let scheme = url.split_once("://").map(|(scheme, _)| scheme);
    match scheme {
        Some("postgres" | "postgresql") if url.len() > scheme.map_or(0, str::len) + 3 => Ok(()),
        _ => Err(BadDatabaseUrl),
    }
}

/// `database_url`: a PostgreSQL URL, or empty for the home's `kanban.db`.
pub fn database_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<super::DatabaseUrl>, D::Error> {
    let url = String::deserialize(d).map_err(|_| de::Error::custom("expected a string"))?;
    if url.is_empty() {
        return Ok(None);
    }
    check_database_url(&url).map_err(de::Error::custom)?;
    Ok(Some(super::DatabaseUrl::new(url)))
}

/// The database URL as shown: its password redacted.
pub fn redacted_database_url<S: Serializer>(
    url: &Option<super::DatabaseUrl>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match url {
        Some(url) => s.serialize_str(&url.to_string()),
        None => s.serialize_none(),
    }
}

/// `gateway.host_id`: a short name of printable characters without spaces.
pub fn host_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let id = String::deserialize(d)?;
    if id.is_empty() {
        return Ok(None);
    }
    if id.len() > 255 || !id.chars().all(|c| c.is_ascii_graphic()) {
        return Err(de::Error::custom(
            "expected a host name: at most 255 printable ASCII characters, no spaces",
        ));
    }
    Ok(Some(id))
}

/// `model.api_key`; never quoted in an error, since a mistyped key is still a secret.
pub fn api_key<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ApiKey>, D::Error> {
    let secret = String::deserialize(d).map_err(|_| de::Error::custom("expected a string"))?;
    Ok((!secret.is_empty()).then(|| ApiKey::new(secret)))
}

/// The key as shown: `[redacted]` when there is one.
pub fn redacted_key<S: Serializer>(key: &Option<ApiKey>, s: S) -> Result<S::Ok, S::Error> {
    match key {
        Some(key) => s.serialize_str(&key.to_string()),
        None => s.serialize_none(),
    }
}

/// `full` or `normal`, in any case.
pub fn synchronous<'de, D: Deserializer<'de>>(d: D) -> Result<Synchronous, D::Error> {
    struct Choice;
    impl Visitor<'_> for Choice {
        type Value = Synchronous;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("full or normal")
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<Synchronous, E> {
            s.parse().map_err(|_| E::invalid_value(Unexpected::Str(s), &self))
        }
    }
    d.deserialize_any(Choice)
}

pub fn synchronous_name<S: Serializer>(mode: &Synchronous, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match mode {
        Synchronous::Full => "full",
        Synchronous::Normal => "normal",
    })
}

/// One item of a list, read whatever it is, so that the list itself can say which
/// position was wrong.
enum Item {
    Text(String),
    Other(String),
}

impl Item {
    fn described(&self) -> String {
        match self {
            Item::Text(s) => format!("{s:?}"),
            Item::Other(what) => what.clone(),
        }
    }
}

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Item, D::Error> {
        struct Anything;
        impl<'de> Visitor<'de> for Anything {
            type Value = Item;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_str<E>(self, s: &str) -> Result<Item, E> {
                Ok(Item::Text(s.to_owned()))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Item, E> {
                Ok(Item::Other(n.to_string()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Item, E> {
                Ok(Item::Other(n.to_string()))
            }
            fn visit_f64<E>(self, x: f64) -> Result<Item, E> {
                Ok(Item::Other(x.to_string()))
            }
            fn visit_bool<E>(self, b: bool) -> Result<Item, E> {
                Ok(Item::Other(b.to_string()))
            }
            fn visit_unit<E>(self) -> Result<Item, E> {
                Ok(Item::Other("null".to_owned()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Item, A::Error> {
                Ok(Item::Other("a list".to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Item, A::Error> {
                Ok(Item::Other("a mapping".to_owned()))
            }
        }
        d.deserialize_any(Anything)
    }
}

/// A worker's argv: a non-empty list of strings whose program is not empty, and card
/// text never spliced into code.
pub fn command<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    struct Argv;
    impl<'de> Visitor<'de> for Argv {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of strings")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Vec<String>, A::Error> {
            let mut argv = Vec::new();
            while let Some(item) = items.next_element::<Item>()? {
                match item {
                    Item::Text(s) => argv.push(s),
                    other => {
                        return Err(de::Error::custom(format!(
                            "expected a list of strings, got {} at position {}",
                            other.described(),
                            argv.len() + 1
                        )))
                    }
                }
            }
            Ok(argv)
        }
    }
    let argv = d.deserialize_any(Argv)?;
    if argv.is_empty() {
        return Err(de::Error::custom("must not be empty"));
    }
    if argv[0].trim().is_empty() {
        return Err(de::Error::custom(
            "the program (the first item) must not be empty",
        ));
    }
    check_card_text(&argv).map_err(de::Error::custom)?;
    Ok(Some(argv))
}

/// An optional integer in `1..=MAX` (absent: no cap).
pub fn optional_positive<'de, D: Deserializer<'de>, const MAX: i64>(d: D) -> Result<Option<usize>, D::Error> {
    bounded(d, 1, MAX).map(Some)
}

/// Card text never becomes code. `{title}` may only be a whole argument: inside a larger
/// string any program may read it as code (`python3 -c "print('{title}')"`, `sh -c`,
/// `--eval={title}`), and it is never the program, nor the code a shell's `-c` (or any
/// program's `-c`, `-e`, `--eval`) runs. `{body}` is not a placeholder at all: a body is
/// long and a worker reads it with `kanban context`.
fn check_card_text(argv: &[String]) -> Result<(), String> {
    const TITLE: &str = "{title}";
    if argv.iter().any(|arg| arg.contains("{body}")) {
        return Err("{body} is not a placeholder; a worker reads the body with `kanban context`".to_owned());
    }
    if argv.first().is_some_and(|program| program.contains(TITLE)) {
        return Err("the program (the first item) cannot come from the card's {title}".to_owned());
    }
    if let Some(arg) = argv
        .iter()
        .find(|arg| arg.contains(TITLE) && arg.as_str() != TITLE)
    {
        return Err(format!(
            "{{title}} inside {arg:?}: card text may only be a whole argument, since a program \
             may run text inside a larger string as code; pass \"{{title}}\" on its own or read \
             \"$KANBAN_TITLE\""
        ));
    }
    let basename = |arg: &str| arg.rsplit('/').next().unwrap_or(arg).to_owned();
    let shell = argv
        .iter()
        .position(|arg| SHELLS.contains(&basename(arg).as_str()));
    // A shell takes its code after any cluster of short flags holding `c` (`-lc`, `-ec`).
    let cluster_with_c = |flag: &str| {
        flag.strip_prefix('-')
            .is_some_and(|f| !f.is_empty() && f.chars().all(|c| c.is_ascii_alphabetic()) && f.contains('c'))
    };
    let runs_code = |i: usize, flag: &str| {
        CODE_FLAGS.contains(&flag) || (shell.is_some_and(|s| s < i) && cluster_with_c(flag))
    };
    for (i, pair) in argv.windows(2).enumerate() {
        if pair[1] == TITLE && runs_code(i, &pair[0]) {
            return Err(format!(
                "{{title}} as the code of `{} {}` would run card text as code; pass it as data \
                 (an argument after the code) or read \"$KANBAN_TITLE\"",
                basename(&argv[shell.filter(|&s| s < i).unwrap_or(0)]),
                pair[0]
            ));
        }
    }
    Ok(())
}

/// A list of environment variable names.
pub fn variable_names<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct Names;
    impl<'de> Visitor<'de> for Names {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of variable names")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Vec<String>, A::Error> {
            let mut names = Vec::new();
            while let Some(item) = items.next_element::<Item>()? {
                match item {
                    Item::Text(name) if !name.is_empty() && !name.contains(['=', '\0']) => names.push(name),
                    other => {
                        let got = other.described();
                        return Err(de::Error::custom(format!("expected a variable name, got {got}")));
                    }
                }
            }
            Ok(names)
        }
    }
    d.deserialize_any(Names)
}

/// `profiles`: named profiles, `default` always among them (implied when not given,
/// and described when given without a description).
pub fn profiles<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, ProfileConfig>, D::Error> {
    struct Profiles;
    impl<'de> Visitor<'de> for Profiles {
        type Value = BTreeMap<String, ProfileConfig>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a mapping of profile names")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Self::Value, A::Error> {
            let mut profiles = implied_profiles();
            while let Some(key) = entries.next_key::<Item>()? {
                let name = match key {
                    Item::Text(name) if !name.trim().is_empty() => name,
                    other => {
                        let got = other.described();
                        let problem = format!("a profile name must be a non-empty string, got {got}");
                        return Err(de::Error::custom(problem));
                    }
                };
                let mut profile: ProfileConfig = entries.next_value()?;
                if name == DEFAULT_PROFILE && profile.description.is_empty() {
                    profile.description = DEFAULT_PROFILE_DESCRIPTION.to_owned();
                }
                profiles.insert(name, profile);
            }
            Ok(profiles)
        }
    }
    d.deserialize_map(Profiles)
}

/// The profiles of a file without any: the command-less `default`.
pub fn implied_profiles() -> BTreeMap<String, ProfileConfig> {
    let default = ProfileConfig {
        description: DEFAULT_PROFILE_DESCRIPTION.to_owned(),
        ..ProfileConfig::default()
    };
    BTreeMap::from([(DEFAULT_PROFILE.to_owned(), default)])
}
