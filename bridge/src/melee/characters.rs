//! Melee's characters and the three numberings the game uses for them (docs/melee-reference.md,
//! section 7). Mixing them up picks the wrong fighter without any error, so every
//! character is one row here and code asks the row for the id it needs:
//!
//! - **icon**: the character-select screen's icon order, left to right, top row first
//!   (Dr. Mario 0x00 ... Roy 0x18). The byte under each port's slot (0x803F0E0A +
//!   0x24 per port) and the cursor grid use it.
//! - **external**: the static player block's character (+0x04), e.g. Fox 0x02.
//! - **internal**: the fighter entity's character (+0x64), e.g. Fox 0x01.
//!
//! Sources: the icon order and the external ids are those of libmelee's `enums.py`
//! (`Character` with `to_internal`/`from_internal`) and of Slippi's `SendMenuFrame.asm`
//! (which exports the slot byte); the internal ids are libmelee's `Character` enum and
//! the decompilation's `FighterKind`. The grid positions are libmelee's
//! `menuhelper.choose_character` (9 icons a row, the bottom row one place right
//! because of the random slot, each icon 7 units wide and tall).

/// One character: its place on the select screen and its ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Character {
    pub name: &'static str,
    /// Position in the select screen's icon order (the slot byte, the grid).
    pub icon: u8,
    /// Static player block +0x04.
    pub external: u8,
    /// Fighter entity +0x64.
    pub internal: u8,
}

const fn ch(name: &'static str, icon: u8, external: u8, internal: u8) -> Character {
    Character { name, icon, external, internal }
}

pub const DR_MARIO: Character = ch("Dr. Mario", 0x00, 0x16, 0x15);
pub const MARIO: Character = ch("Mario", 0x01, 0x08, 0x00);
pub const LUIGI: Character = ch("Luigi", 0x02, 0x07, 0x11);
pub const BOWSER: Character = ch("Bowser", 0x03, 0x05, 0x05);
pub const PEACH: Character = ch("Peach", 0x04, 0x0C, 0x09);
pub const YOSHI: Character = ch("Yoshi", 0x05, 0x11, 0x0E);
pub const DONKEY_KONG: Character = ch("Donkey Kong", 0x06, 0x01, 0x03);
pub const CAPTAIN_FALCON: Character = ch("Captain Falcon", 0x07, 0x00, 0x02);
pub const GANONDORF: Character = ch("Ganondorf", 0x08, 0x19, 0x19);
pub const FALCO: Character = ch("Falco", 0x09, 0x14, 0x16);
pub const FOX: Character = ch("Fox", 0x0A, 0x02, 0x01);
pub const NESS: Character = ch("Ness", 0x0B, 0x0B, 0x08);
/// Internal id of Popo, the Ice Climber a player controls (Nana is 0x0B).
pub const ICE_CLIMBERS: Character = ch("Ice Climbers", 0x0C, 0x0E, 0x0A);
pub const KIRBY: Character = ch("Kirby", 0x0D, 0x04, 0x04);
pub const SAMUS: Character = ch("Samus", 0x0E, 0x10, 0x0D);
/// Sheik (external 0x13, internal 0x07) has no icon: she is chosen through Zelda.
pub const ZELDA: Character = ch("Zelda", 0x0F, 0x12, 0x13);
pub const LINK: Character = ch("Link", 0x10, 0x06, 0x06);
pub const YOUNG_LINK: Character = ch("Young Link", 0x11, 0x15, 0x14);
pub const PICHU: Character = ch("Pichu", 0x12, 0x18, 0x17);
pub const PIKACHU: Character = ch("Pikachu", 0x13, 0x0D, 0x0C);
pub const JIGGLYPUFF: Character = ch("Jigglypuff", 0x14, 0x0F, 0x0F);
pub const MEWTWO: Character = ch("Mewtwo", 0x15, 0x0A, 0x10);
pub const GAME_AND_WATCH: Character = ch("Mr. Game & Watch", 0x16, 0x03, 0x18);
pub const MARTH: Character = ch("Marth", 0x17, 0x09, 0x12);
pub const ROY: Character = ch("Roy", 0x18, 0x17, 0x1A);

/// Every character with an icon, in icon order (a disc with everything unlocked; the
/// grid positions assume it).
pub const ROSTER: [Character; 25] = [
    DR_MARIO,
    MARIO,
    LUIGI,
    BOWSER,
    PEACH,
    YOSHI,
    DONKEY_KONG,
    CAPTAIN_FALCON,
    GANONDORF,
    FALCO,
    FOX,
    NESS,
    ICE_CLIMBERS,
    KIRBY,
    SAMUS,
    ZELDA,
    LINK,
    YOUNG_LINK,
    PICHU,
    PIKACHU,
    JIGGLYPUFF,
    MEWTWO,
    GAME_AND_WATCH,
    MARTH,
    ROY,
];

/// Icons per row on the select screen.
const ROW: u8 = 9;

impl Character {
    /// The centre of this character's icon in the select screen's cursor units
    /// (libmelee's grid: rows from the bottom, the bottom row one place right).
    pub fn icon_centre(self) -> (f32, f32) {
        let (row, mut col) = (self.icon / ROW, self.icon % ROW);
        if row == 2 {
            col += 1; // the random slot sits left of the bottom row
        }
        let from_bottom = 2 - row;
        (-32.5 + 3.5 + f32::from(col) * 7.0, 1.0 + 3.5 + f32::from(from_bottom) * 7.0)
    }

    /// The row whose slot byte (icon order) is `icon`.
    pub fn by_icon(icon: u8) -> Option<Character> {
        ROSTER.get(usize::from(icon)).copied()
    }
    /// The row whose fighter +0x64 is `internal` (Nana reads as the Ice Climbers).
    pub fn by_internal(internal: u32) -> Option<Character> {
        ROSTER.iter().copied().find(|c| u32::from(c.internal) == internal || (internal == 0x0B && *c == ICE_CLIMBERS))
    }
}

impl std::fmt::Display for Character {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// A human name for an id read from RAM, for error messages: "Fox" or "unknown (0x2a)".
pub fn describe(found: Option<Character>, raw: u32) -> String {
    match found {
        Some(c) => c.name.to_string(),
        None => format!("unknown ({raw:#04x})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written out from libmelee's `enums.py` (`Character`, `to_internal`): the select
    /// screen's icon order, read left to right and top to bottom on the screen.
    const ICON_ORDER: [&str; 25] = [
        "Dr. Mario",
        "Mario",
        "Luigi",
        "Bowser",
        "Peach",
        "Yoshi",
        "Donkey Kong",
        "Captain Falcon",
        "Ganondorf",
        "Falco",
        "Fox",
        "Ness",
        "Ice Climbers",
        "Kirby",
        "Samus",
        "Zelda",
        "Link",
        "Young Link",
        "Pichu",
        "Pikachu",
        "Jigglypuff",
        "Mewtwo",
        "Mr. Game & Watch",
        "Marth",
        "Roy",
    ];
    /// External ids (`CharacterKind`, static block +0x04), 0x00..=0x19, Sheik at 0x13.
    const EXTERNAL: [&str; 26] = [
        "Captain Falcon",
        "Donkey Kong",
        "Fox",
        "Mr. Game & Watch",
        "Kirby",
        "Bowser",
        "Link",
        "Luigi",
        "Mario",
        "Marth",
        "Mewtwo",
        "Ness",
        "Peach",
        "Pikachu",
        "Ice Climbers",
        "Jigglypuff",
        "Samus",
        "Yoshi",
        "Zelda",
        "Sheik",
        "Falco",
        "Young Link",
        "Dr. Mario",
        "Roy",
        "Pichu",
        "Ganondorf",
    ];
    /// Internal ids (libmelee `Character`, the decompilation's `FighterKind`), 0x00..=0x1A:
    /// Sheik 0x07, Popo 0x0A, Nana 0x0B.
    const INTERNAL: [&str; 27] = [
        "Mario",
        "Fox",
        "Captain Falcon",
        "Donkey Kong",
        "Kirby",
        "Bowser",
        "Link",
        "Sheik",
        "Ness",
        "Peach",
        "Ice Climbers",
        "Nana",
        "Pikachu",
        "Samus",
        "Yoshi",
        "Jigglypuff",
        "Mewtwo",
        "Luigi",
        "Marth",
        "Zelda",
        "Young Link",
        "Dr. Mario",
        "Falco",
        "Pichu",
        "Mr. Game & Watch",
        "Ganondorf",
        "Roy",
    ];

    #[test]
    fn each_row_agrees_with_the_three_tables_written_from_the_sources() {
        for (i, c) in ROSTER.iter().enumerate() {
            assert_eq!(c.icon as usize, i, "{c:?} is out of icon order");
            assert_eq!(ICON_ORDER[i], c.name);
            assert_eq!(EXTERNAL[c.external as usize], c.name, "external id of {}", c.name);
            assert_eq!(INTERNAL[c.internal as usize], c.name, "internal id of {}", c.name);
        }
        assert_eq!((FOX.icon, FOX.external, FOX.internal), (0x0A, 0x02, 0x01));
        assert_eq!((MARTH.icon, MARTH.external, MARTH.internal), (0x17, 0x09, 0x12));
    }

    #[test]
    fn the_external_ids_are_not_icon_positions() {
        // The defect this table fixes: Fox's external id (0x02) is Luigi's icon, and
        // Marth's (0x09) is Falco's.
        assert_eq!(Character::by_icon(FOX.external), Some(LUIGI));
        assert_eq!(Character::by_icon(MARTH.external), Some(FALCO));
    }

    #[test]
    fn grid_positions_follow_libmelee() {
        // Fox: middle row, second icon; Marth: bottom row, shifted one place right.
        assert_eq!(FOX.icon_centre(), (-22.0, 11.5));
        assert_eq!(MARTH.icon_centre(), (13.0, 4.5));
        assert_eq!(DR_MARIO.icon_centre(), (-29.0, 18.5));
        assert_eq!(PICHU.icon_centre(), (-22.0, 4.5));
    }

    #[test]
    fn lookups() {
        assert_eq!(Character::by_internal(0x12), Some(MARTH));
        assert_eq!(Character::by_internal(0x0B), Some(ICE_CLIMBERS));
        assert_eq!(Character::by_internal(0x07), None, "Sheik has no icon");
        assert_eq!(Character::by_icon(25), None);
        assert_eq!(describe(None, 0x2a), "unknown (0x2a)");
    }
}
