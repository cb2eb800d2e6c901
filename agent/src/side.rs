//! Which fighter a bot plays: Fox (the side the paper's agent plays) or Marth (the
//! simulator's opponent side).
//!
//! A match has one layout whoever plays it: [`MatchSetup::agent_port`] is Fox's port
//! and [`MatchSetup::opponent_port`] Marth's (the simulator puts Fox on the agent's
//! port and Marth on the opponent's). A bot sees the match from its own side: for a
//! Marth bot the two ports swap, so the same state reader gives it the same 27-float
//! layout from its point of view (its opponent's 13 floats first, then its own), and
//! the same task gives it the reward of its side.

use shine_bridge::melee::characters::{self, Character};
use shine_bridge::MatchSetup;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    #[default]
    Fox,
    Marth,
}

impl Side {
    pub const ALL: [Side; 2] = [Side::Fox, Side::Marth];

    pub fn name(self) -> &'static str {
        match self {
            Side::Fox => "fox",
            Side::Marth => "marth",
        }
    }

    /// The fighter this side plays, in Melee's id spaces (the simulator's Fox and
    /// Marth are these; in Dolphin the menus pick it by its icon).
    pub fn character(self) -> Character {
        match self {
            Side::Fox => characters::FOX,
            Side::Marth => characters::MARTH,
        }
    }

    /// The side facing this one.
    pub fn other(self) -> Side {
        match self {
            Side::Fox => Side::Marth,
            Side::Marth => Side::Fox,
        }
    }

    /// The match as a bot on this side sees it: `agent_port` is its own port,
    /// `opponent_port` the other side's. Its own inverse, so it also turns a bot's view
    /// back into the match's layout.
    pub fn view(self, game: MatchSetup) -> MatchSetup {
        match self {
            Side::Fox => game,
            Side::Marth => MatchSetup { agent_port: game.opponent_port, opponent_port: game.agent_port, ..game },
        }
    }
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Side {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fox" => Ok(Side::Fox),
            "marth" => Ok(Side::Marth),
            _ => Err(format!("unknown side {s:?} (expected fox or marth)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_swaps_ports_for_marth_and_is_its_own_inverse() {
        let game = MatchSetup { agent_port: 1, opponent_port: 0, cpu_level: 7, stocks: 3 };
        assert_eq!(Side::Fox.view(game), game);
        let m = Side::Marth.view(game);
        assert_eq!((m.agent_port, m.opponent_port, m.cpu_level, m.stocks), (0, 1, 7, 3));
        assert_eq!(Side::Marth.view(m), game);
        for s in Side::ALL {
            assert_eq!(s.name().parse::<Side>(), Ok(s));
            assert_eq!(s.other().other(), s);
        }
        assert!("falco".parse::<Side>().unwrap_err().contains("fox or marth"));
        assert_eq!((Side::Fox.character(), Side::Marth.character()), (characters::FOX, characters::MARTH));
    }
}
