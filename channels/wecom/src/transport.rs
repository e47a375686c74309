//! How events arrive: the intelligent bot's long connection (`ws`), the only mode built
//! (the callback mode is not; see the README).

pub mod ws;
