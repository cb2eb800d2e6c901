//! The homebrew probe (`bridge/probe/probe.c`): building it, and reading what it
//! mirrors into guest RAM. It lets Shine prove against the real emulator, without a
//! game image, that launch, RAM mapping, the frame tick and the controller pipe work.

use super::dol::{Dol, DolError};
use crate::ram::{RamError, RamView};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The probe's C source, compiled into the binary so `doctor` can build it anywhere.
pub const SOURCE: &str = include_str!("../../probe/probe.c");
/// The cross compiler (Debian: `gcc-powerpc-linux-gnu`).
pub const CC: &str = "powerpc-linux-gnu-gcc";
/// Linked where homebrew loads (docs/melee-reference.md, section 5).
pub const LOAD_ADDR: u32 = 0x8000_3100;

/// Mailbox layout; mirrors `probe.c`.
pub const MAILBOX: u32 = 0x8040_0000;
pub const MAGIC: u32 = 0x5348_4E50; // "SHNP"
pub const MB_FRAMES: u32 = 0x04;
pub const MB_LOOPS: u32 = 0x08;
pub const MB_INBUFH: u32 = 0x0C;
pub const MB_INBUFL: u32 = 0x10;

#[derive(Debug, thiserror::Error)]
pub enum ProbeBuildError {
    #[error("the PowerPC cross compiler `{CC}` is not installed: install it (Debian/Ubuntu: `sudo apt-get install gcc-powerpc-linux-gnu`), or run .ci/run's install step")]
    NoCompiler,
    #[error("{CC} failed ({status}):\n{stderr}")]
    Compile { status: String, stderr: String },
    #[error("packing the probe as a DOL: {0}")]
    Pack(#[from] DolError),
    #[error("writing the probe to {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// Compile the probe into `dir` and pack it: returns the path of `probe.dol`.
pub fn build(dir: &Path) -> Result<PathBuf, ProbeBuildError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ProbeBuildError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let src = dir.join("probe.c");
    let elf = dir.join("probe.elf");
    std::fs::write(&src, SOURCE).map_err(io(&src))?;
    let out = Command::new(CC)
        .args(["-mcpu=750", "-O2", "-ffreestanding", "-nostdlib", "-fno-pic", "-mno-sdata", "-fno-asynchronous-unwind-tables", "-static"])
        .arg(format!("-Wl,-Ttext={LOAD_ADDR:#x}"))
        .args(["-Wl,-e,_start", "-Wl,--build-id=none", "-o"])
        .arg(&elf)
        .arg(&src)
        .output()
        .map_err(
            |e| if e.kind() == std::io::ErrorKind::NotFound { ProbeBuildError::NoCompiler } else { ProbeBuildError::Io { path: src.clone(), source: e } },
        )?;
    if !out.status.success() {
        return Err(ProbeBuildError::Compile { status: out.status.to_string(), stderr: String::from_utf8_lossy(&out.stderr).into_owned() });
    }
    let bytes = std::fs::read(&elf).map_err(io(&elf))?;
    let dol_path = dir.join("probe.dol");
    std::fs::write(&dol_path, Dol::from_elf(&bytes)?.to_bytes()?).map_err(io(&dol_path))?;
    Ok(dol_path)
}

/// What the probe mirrored: controller port 2 as the Serial Interface delivered it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbePad {
    /// SI status word bits (byte 0: 0x01 A, 0x02 B, 0x04 X, 0x08 Y, 0x10 START; byte 1:
    /// 0x01 D-left, 0x02 D-right, 0x04 D-down, 0x08 D-up, 0x10 Z, 0x20 R, 0x40 L).
    pub buttons: u16,
    pub main: (u8, u8),
    pub c: (u8, u8),
    pub l: u8,
    pub r: u8,
}

impl ProbePad {
    pub fn from_words(h: u32, l: u32) -> ProbePad {
        let [b0, b1, mx, my] = h.to_be_bytes();
        let [cx, cy, la, ra] = l.to_be_bytes();
        ProbePad { buttons: u16::from_be_bytes([b0, b1]), main: (mx, my), c: (cx, cy), l: la, r: ra }
    }
}

/// The probe's mailbox, read from a RAM view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeState {
    pub magic: u32,
    pub frames: u32,
    pub loops: u32,
    pub pad: ProbePad,
    pub raw: (u32, u32),
}

pub fn read(ram: RamView) -> Result<ProbeState, RamError> {
    let h = ram.u32(MAILBOX + MB_INBUFH)?;
    let l = ram.u32(MAILBOX + MB_INBUFL)?;
    Ok(ProbeState {
        magic: ram.u32(MAILBOX)?,
        frames: ram.u32(MAILBOX + MB_FRAMES)?,
        loops: ram.u32(MAILBOX + MB_LOOPS)?,
        pad: ProbePad::from_words(h, l),
        raw: (h, l),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_reference_observations() {
        // docs/melee-reference.md, section 5: nothing pressed; A + main stick right; B + stick down + L.
        assert_eq!(
            ProbePad::from_words(0x0080_8080, 0x8080_0000),
            ProbePad { buttons: 0x0080, main: (0x80, 0x80), c: (0x80, 0x80), l: 0, r: 0 },
            "byte 1 bit 0x80 is always set"
        );
        let p = ProbePad::from_words(0x0180_FF80, 0x8080_0000);
        assert_eq!((p.buttons, p.main), (0x0180, (0xFF, 0x80)));
        let p = ProbePad::from_words(0x0280_8001, 0x8080_FF00);
        assert_eq!((p.buttons >> 8, p.main, p.l), (0x02, (0x80, 0x01), 0xFF));
    }

    #[test]
    fn mailbox_constants_match_the_c_source() {
        for needle in [
            "#define MAILBOX 0x80400000u",
            "#define MB_FRAMES 0x04",
            "#define MB_LOOPS 0x08",
            "#define MB_INBUFH 0x0C",
            "#define MB_INBUFL 0x10",
            "0x53484E50u",
            "#define MELEE_FRAME_COUNTER 0x80479D60u",
        ] {
            assert!(SOURCE.contains(needle), "probe.c and probe.rs disagree: {needle}");
        }
    }
}
