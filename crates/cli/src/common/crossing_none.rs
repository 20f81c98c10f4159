//! Where the WAN emulator is not built, no test crosses one: [`crossing`] finds none.

/// An emulator a test crosses: none can exist here, so the type has no values.
pub enum Crossing {}

/// No emulator around this process.
pub fn crossing() -> Option<Crossing> {
    None
}

impl Crossing {
    /// Never called (no value exists).
    pub fn finish(self, _started_unix_s: f64) -> Option<landspeed_core::emulator::EmulatorReport> {
        match self {}
    }
}
