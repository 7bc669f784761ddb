//! `boards.<slug>.*` and `gateway.boards` (docs/boards.md): what one board of the home
//! does otherwise than the rest, and which boards the home's gateway serves.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use super::{fields, Config, DecomposerConfig, MAX_SPAWN};
use crate::BoardSlug;

/// `boards.<slug>.*`: a board's own values of keys every board otherwise shares.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BoardConfig {
    /// `boards.<slug>.max_spawn`: this board's `kanban.max_spawn`, the workers its
    /// gateway runs at once.
    #[serde(deserialize_with = "max_spawn", skip_serializing_if = "Option::is_none")]
    pub max_spawn: Option<usize>,
    /// `boards.<slug>.decomposer`: this board's `auxiliary.kanban_decomposer`, whole (its
    /// own provider, endpoint, key and ceilings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decomposer: Option<DecomposerConfig>,
}

fn max_spawn<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    fields::non_negative::<_, usize, MAX_SPAWN>(d).map(Some)
}

/// `boards:`, a mapping of board slugs.
pub fn boards<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<BoardSlug, BoardConfig>, D::Error> {
    BTreeMap::deserialize(d)
}

impl Config {
    /// The config as `board` runs under it: its `boards.<slug>` values over the shared
    /// ones.
    pub fn for_board(&self, board: &BoardSlug) -> Config {
        let mut config = self.clone();
        if let Some(own) = self.boards.get(board) {
            if let Some(max_spawn) = own.max_spawn {
                config.kanban.max_spawn = max_spawn;
            }
            if let Some(decomposer) = &own.decomposer {
                config.auxiliary.kanban_decomposer = decomposer.clone();
            }
        }
        config
    }

    /// Whether the home's gateway serves `board`: every board when `gateway.boards` is
    /// empty, else those it names.
    pub fn serves(&self, board: &BoardSlug) -> bool {
        self.gateway.boards.is_empty() || self.gateway.boards.contains(board)
    }
}
