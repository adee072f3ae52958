//! The trace of a run: one compact line per event (virtual time, who, what), and a hash of
//! the whole, to tell whether two runs of one seed did the same thing.

use std::fmt::Write as _;

use crate::clock::{Ms, show};

/// The events of one run. Events of one virtual millisecond are simultaneous: they are shown
/// and hashed in the order of their text, not in the order the simulator saw them (which,
/// within a millisecond, can depend on the iteration order of the code's hash maps).
#[derive(Debug, Default)]
pub struct Trace {
    lines: Vec<(Ms, String)>,
}

impl Trace {
    /// Records `what` done by `who` at `t`.
    pub(crate) fn add(&mut self, t: Ms, who: &str, what: impl std::fmt::Display) {
        let mut line = String::with_capacity(48);
        let _ = write!(line, "{who} {what}");
        self.lines.push((t, line));
    }

    fn sorted(&self) -> Vec<&(Ms, String)> {
        let mut lines: Vec<&(Ms, String)> = self.lines.iter().collect();
        lines.sort();
        lines
    }

    /// A hash (FNV-1a) of every line: two runs with equal hashes did the same thing, as far
    /// as the trace shows.
    pub fn hash(&self) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for (t, line) in self.sorted() {
            for b in t
                .to_le_bytes()
                .into_iter()
                .chain(line.bytes())
                .chain([b'\n'])
            {
                hash ^= u64::from(b);
                hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        hash
    }

    /// How many lines.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Every line, `seconds who what`.
    pub fn lines(&self) -> impl Iterator<Item = String> + '_ {
        self.sorted()
            .into_iter()
            .map(|(t, line)| format!("{:>8} {line}", show(*t)))
    }
}
