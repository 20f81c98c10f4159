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

/// `latency --aqm`: no emulator to switch here, so no value exists.
pub enum Disciplines {}

impl Disciplines {
    /// Refused: no emulator on this platform.
    pub fn enclosing() -> Result<Disciplines, String> {
        landspeed_engine::platform::require("WAN emulator").map_err(|e| e.to_string())?;
        Err("no WAN emulator on this platform".into())
    }

    /// Anything passes here: [`Disciplines::enclosing`] refuses first.
    pub fn check(_aqm: &str) -> Result<(), String> {
        Ok(())
    }

    /// Never called (no value exists).
    pub fn name(&self) -> &str {
        match *self {}
    }

    /// Never called.
    pub fn original(&self) -> String {
        match *self {}
    }

    /// Never called.
    pub fn set(&self, _aqm: &str) -> Result<(), String> {
        match *self {}
    }

    /// Never called.
    pub fn restore(&self) -> Result<(), String> {
        match *self {}
    }
}
