//! The DOL executable format, and packing a freestanding PowerPC ELF into one.
//!
//! A DOL (docs/melee-reference.md, section 5) is a 0x100-byte big-endian header followed by the
//! section bytes: 7 text and 11 data sections, each with a file offset, a load
//! address and a size, then one BSS range and the entry point. Dolphin boots it
//! directly (`-e probe.dol`), which is how the probe runs without a game image.
//!
//! ELF input is read through checked accessors: a truncated or hostile file is an
//! error, never a panic. Only `SHF_ALLOC` sections are taken (by section header, not
//! program header: a linked-at-0x80003100 ELF's first segment also covers the ELF
//! header below the load address, which must not be loaded into low memory).

use thiserror::Error;

pub const HEADER_SIZE: usize = 0x100;
pub const MAX_TEXT: usize = 7;
pub const MAX_DATA: usize = 11;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DolError {
    #[error("not a 32-bit big-endian PowerPC ELF executable ({0})")]
    NotPpcElf(&'static str),
    #[error("ELF is truncated or malformed: {0}")]
    Malformed(&'static str),
    #[error("too many {kind} sections for a DOL ({count}; the format holds {max})")]
    TooManySections { kind: &'static str, count: usize, max: usize },
    #[error("section at {addr:#010x} is outside GameCube RAM (0x80000000..0x81800000)")]
    OutsideRam { addr: u32 },
    #[error("the ELF has no loadable code")]
    NoCode,
    #[error("DOL is truncated or malformed: {0}")]
    BadDol(&'static str),
}

/// One loadable section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub addr: u32,
    pub bytes: Vec<u8>,
}

/// A DOL executable in memory.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dol {
    pub text: Vec<Section>,
    pub data: Vec<Section>,
    pub bss_addr: u32,
    pub bss_size: u32,
    pub entry: u32,
}

fn be32(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..off.checked_add(4)?).map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}
fn be16(b: &[u8], off: usize) -> Option<u16> {
    b.get(off..off.checked_add(2)?).map(|s| u16::from_be_bytes([s[0], s[1]]))
}

fn in_ram(addr: u32, size: u32) -> bool {
    addr >= 0x8000_0000 && (addr as u64 + size as u64) <= 0x8180_0000
}

impl Dol {
    /// Pack the allocated sections of a linked PowerPC ELF: executable ones as text,
    /// the rest as data, `NOBITS` (.bss, .sbss) as the one BSS range.
    pub fn from_elf(elf: &[u8]) -> Result<Dol, DolError> {
        const SHT_NOBITS: u32 = 8;
        const SHF_ALLOC: u32 = 0x2;
        const SHF_EXECINSTR: u32 = 0x4;
        if elf.get(0..4) != Some(b"\x7fELF") {
            return Err(DolError::NotPpcElf("no ELF magic"));
        }
        if elf.get(4) != Some(&1) || elf.get(5) != Some(&2) {
            return Err(DolError::NotPpcElf("not ELF32 big-endian"));
        }
        let bad = DolError::Malformed("header");
        if be16(elf, 18).ok_or(bad.clone())? != 20 {
            return Err(DolError::NotPpcElf("machine is not PowerPC"));
        }
        let entry = be32(elf, 24).ok_or(bad.clone())?;
        let shoff = be32(elf, 32).ok_or(bad.clone())? as usize;
        let shentsize = be16(elf, 46).ok_or(bad.clone())? as usize;
        let shnum = be16(elf, 48).ok_or(bad)? as usize;
        if shentsize < 40 {
            return Err(DolError::Malformed("section header size"));
        }
        let mut dol = Dol { entry, ..Dol::default() };
        let (mut bss_lo, mut bss_hi) = (u32::MAX, 0u32);
        for i in 0..shnum {
            let h = shoff.checked_add(i.checked_mul(shentsize).ok_or(DolError::Malformed("section table"))?).ok_or(DolError::Malformed("section table"))?;
            let field = |o: usize| be32(elf, h + o).ok_or(DolError::Malformed("section header"));
            let (kind, flags, addr, off, size) = (field(4)?, field(8)?, field(12)?, field(16)? as usize, field(20)?);
            if flags & SHF_ALLOC == 0 || size == 0 {
                continue;
            }
            if !in_ram(addr, size) {
                return Err(DolError::OutsideRam { addr });
            }
            if kind == SHT_NOBITS {
                bss_lo = bss_lo.min(addr);
                bss_hi = bss_hi.max(addr + size);
                continue;
            }
            let bytes = off.checked_add(size as usize).and_then(|end| elf.get(off..end)).ok_or(DolError::Malformed("section data past the end of the file"))?;
            let s = Section { addr, bytes: bytes.to_vec() };
            if flags & SHF_EXECINSTR != 0 {
                dol.text.push(s);
            } else {
                dol.data.push(s);
            }
        }
        if dol.text.is_empty() {
            return Err(DolError::NoCode);
        }
        if bss_lo < bss_hi {
            dol.bss_addr = bss_lo;
            dol.bss_size = bss_hi - bss_lo;
        }
        dol.check()?;
        Ok(dol)
    }

    fn check(&self) -> Result<(), DolError> {
        if self.text.len() > MAX_TEXT {
            return Err(DolError::TooManySections { kind: "text", count: self.text.len(), max: MAX_TEXT });
        }
        if self.data.len() > MAX_DATA {
            return Err(DolError::TooManySections { kind: "data", count: self.data.len(), max: MAX_DATA });
        }
        Ok(())
    }

    /// The DOL file: header, then each section's bytes (32-byte aligned, as the
    /// Nintendo tools lay them out).
    pub fn to_bytes(&self) -> Result<Vec<u8>, DolError> {
        self.check()?;
        let mut out = vec![0u8; HEADER_SIZE];
        let put = |out: &mut Vec<u8>, at: usize, v: u32| out[at..at + 4].copy_from_slice(&v.to_be_bytes());
        let sections = self.text.iter().map(|s| (0usize, s)).chain(self.data.iter().map(|s| (1usize, s)));
        let (mut ti, mut di) = (0usize, 0usize);
        for (kind, s) in sections {
            while !out.len().is_multiple_of(32) {
                out.push(0);
            }
            let slot = if kind == 0 {
                ti += 1;
                ti - 1
            } else {
                di += 1;
                MAX_TEXT + di - 1
            };
            let len = u32::try_from(s.bytes.len()).map_err(|_| DolError::BadDol("section too large"))?;
            let off = out.len() as u32;
            put(&mut out, slot * 4, off);
            put(&mut out, 0x48 + slot * 4, s.addr);
            put(&mut out, 0x90 + slot * 4, len);
            out.extend_from_slice(&s.bytes);
        }
        put(&mut out, 0xD8, self.bss_addr);
        put(&mut out, 0xDC, self.bss_size);
        put(&mut out, 0xE0, self.entry);
        Ok(out)
    }

    /// Read a DOL back (round-trip tests, and `doctor` sanity-checking a user's file).
    pub fn parse(b: &[u8]) -> Result<Dol, DolError> {
        if b.len() < HEADER_SIZE {
            return Err(DolError::BadDol("shorter than its 0x100-byte header"));
        }
        let h = |o: usize| be32(b, o).ok_or(DolError::BadDol("header"));
        let mut dol = Dol { bss_addr: h(0xD8)?, bss_size: h(0xDC)?, entry: h(0xE0)?, ..Dol::default() };
        for slot in 0..MAX_TEXT + MAX_DATA {
            let (off, addr, size) = (h(slot * 4)? as usize, h(0x48 + slot * 4)?, h(0x90 + slot * 4)? as usize);
            if size == 0 {
                continue;
            }
            let bytes = off.checked_add(size).and_then(|e| b.get(off..e)).ok_or(DolError::BadDol("section past the end of the file"))?;
            let s = Section { addr, bytes: bytes.to_vec() };
            if slot < MAX_TEXT {
                dol.text.push(s);
            } else {
                dol.data.push(s);
            }
        }
        if dol.text.is_empty() {
            return Err(DolError::BadDol("no text section"));
        }
        Ok(dol)
    }

    /// The 32-bit word the guest sees at `addr` once loaded (None outside the sections).
    pub fn word_at(&self, addr: u32) -> Option<u32> {
        self.text.iter().chain(&self.data).find_map(|s| {
            let off = addr.checked_sub(s.addr)? as usize;
            be32(&s.bytes, off)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF32 BE PowerPC file with the given sections (type, flags, addr, bytes).
    pub(crate) fn tiny_elf(entry: u32, sections: &[(u32, u32, u32, Vec<u8>)]) -> Vec<u8> {
        let mut f = vec![0u8; 52];
        f[0..4].copy_from_slice(b"\x7fELF");
        f[4] = 1;
        f[5] = 2;
        f[6] = 1;
        f[18..20].copy_from_slice(&20u16.to_be_bytes());
        f[24..28].copy_from_slice(&entry.to_be_bytes());
        let mut offs = vec![];
        for (_, _, _, b) in sections {
            offs.push(f.len() as u32);
            f.extend_from_slice(b);
        }
        let shoff = f.len() as u32;
        f[32..36].copy_from_slice(&shoff.to_be_bytes());
        f[46..48].copy_from_slice(&40u16.to_be_bytes());
        f[48..50].copy_from_slice(&(sections.len() as u16 + 1).to_be_bytes());
        f.extend_from_slice(&[0u8; 40]); // the null section
        for ((kind, flags, addr, b), off) in sections.iter().zip(offs) {
            let mut h = [0u8; 40];
            h[4..8].copy_from_slice(&kind.to_be_bytes());
            h[8..12].copy_from_slice(&flags.to_be_bytes());
            h[12..16].copy_from_slice(&addr.to_be_bytes());
            h[16..20].copy_from_slice(&off.to_be_bytes());
            h[20..24].copy_from_slice(&(b.len() as u32).to_be_bytes());
            f.extend_from_slice(&h);
        }
        f
    }

    #[test]
    fn elf_sections_become_dol_sections_and_round_trip() {
        let code = vec![0x48, 0, 0, 0, 0x60, 0, 0, 0];
        let data = vec![1, 2, 3, 4];
        let elf = tiny_elf(
            0x8000_3104,
            &[
                (1, 0x6, 0x8000_3100, code.clone()),
                (1, 0x3, 0x8000_4000, data.clone()),
                (8, 0x3, 0x8000_5000, vec![0; 64]),  // .bss: no file bytes are taken
                (1, 0x0, 0, b"not loaded".to_vec()), // .comment: not SHF_ALLOC
            ],
        );
        let dol = Dol::from_elf(&elf).unwrap();
        assert_eq!(dol.text, vec![Section { addr: 0x8000_3100, bytes: code }]);
        assert_eq!(dol.data, vec![Section { addr: 0x8000_4000, bytes: data }]);
        assert_eq!((dol.bss_addr, dol.bss_size, dol.entry), (0x8000_5000, 64, 0x8000_3104));
        let bytes = dol.to_bytes().unwrap();
        // Header fields where the format puts them: text 0 offset/address/size, entry.
        assert_eq!(&bytes[0..4], &0x100u32.to_be_bytes());
        assert_eq!(&bytes[0x48..0x4C], &0x8000_3100u32.to_be_bytes());
        assert_eq!(&bytes[0x90..0x94], &8u32.to_be_bytes());
        assert_eq!(&bytes[0xE0..0xE4], &0x8000_3104u32.to_be_bytes());
        assert_eq!(Dol::parse(&bytes).unwrap(), dol);
        assert_eq!(dol.word_at(0x8000_3104), Some(0x6000_0000));
        assert_eq!(dol.word_at(0x8000_4000), Some(0x0102_0304));
        assert_eq!(dol.word_at(0x8000_3108), None);
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(matches!(Dol::from_elf(b""), Err(DolError::NotPpcElf(_))));
        assert!(matches!(Dol::from_elf(b"\x7fELF\x02\x01"), Err(DolError::NotPpcElf(_))));
        let mut x86 = tiny_elf(0, &[(1, 0x6, 0x8000_3100, vec![0; 4])]);
        x86[18..20].copy_from_slice(&3u16.to_be_bytes());
        assert!(matches!(Dol::from_elf(&x86), Err(DolError::NotPpcElf(_))));
        let low = tiny_elf(0, &[(1, 0x6, 0x1000, vec![0; 4])]);
        assert_eq!(Dol::from_elf(&low), Err(DolError::OutsideRam { addr: 0x1000 }));
        let nocode = tiny_elf(0, &[(1, 0x3, 0x8000_4000, vec![0; 4])]);
        assert_eq!(Dol::from_elf(&nocode), Err(DolError::NoCode));
        let good = tiny_elf(0, &[(1, 0x6, 0x8000_3100, vec![0; 4])]);
        for cut in 0..good.len() {
            let _ = Dol::from_elf(&good[..cut]); // every truncation: no panic
        }
        assert!(Dol::parse(&[0u8; 10]).is_err());
        let mut dol = Dol::from_elf(&good).unwrap().to_bytes().unwrap();
        dol[0x90..0x94].copy_from_slice(&0xFFFF_FFF0u32.to_be_bytes());
        assert!(Dol::parse(&dol).is_err());
        let many = Dol { text: vec![Section { addr: 0x8000_3100, bytes: vec![0; 4] }; 8], ..Dol::default() };
        assert!(matches!(many.to_bytes(), Err(DolError::TooManySections { kind: "text", .. })));
    }
}
