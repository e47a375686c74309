//! The adapter conformance harness: what each platform's end-to-end set-up offers the
//! shared scenarios of `tests/adapters.rs`, so that one scenario body runs on every platform.
//!
//! A platform implements [`Conformance`] next to its own tests (`tests/<p>/conformance.rs`;
//! the console, which has no test module of its own, in `tests/adapters/terminal.rs`): start
//! the real daemon, its channel, the platform's fake and the Gateway simulator; let a user
//! speak in a private chat, in a group, or send a picture; read back what the fake shows the
//! user, as plain text; name the secrets that must never reach a log line.
//!
//! The trait is generic, not object-safe, on purpose: its methods are native `async fn`s (no
//! boxing, no `async-trait`), and the scenarios are generic functions that a macro stamps
//! into one `#[tokio::test]` per scenario × platform, so each pair runs in parallel with
//! the rest, is named in the output and can be filtered (`-- adapters::qq::`). Nothing
//! needs a list of harnesses as values; the tests that iterate platforms (security's log
//! filter, doctor, packaging) read the daemon's registry, `im_bridge::platforms::PLATFORMS`.
//! The futures need not be `Send`: the tests run on the current-thread runtime, which the
//! log capture needs anyway (a thread-default subscriber then sees the daemon's tasks).

use std::future::Future;
use std::time::{Duration, SystemTime};

use im_bridge::simulator::RunningSimulator;
use im_bridge_channel::LengthUnit;

/// How events reach the channel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// The platform's default: a long poll, a WebSocket or a stream the adapter opens.
    #[default]
    Default,
    /// The platform posts events to the daemon's webhook route.
    Webhook,
}

/// Where a user speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// A private chat with the bot.
    Private,
    /// A group chat, addressing the bot the way the platform requires (a mention).
    Group,
}

/// How a harness sets the platform up.
#[derive(Clone, Copy, Debug, Default)]
pub struct Setup {
    /// How events arrive.
    pub transport: Transport,
    /// The channel's `locale` (`channels.<p>.locale`), when set.
    pub locale: Option<&'static str>,
    /// The channel's `allowed_users` (`channels.<p>.allowed_users`), when set.
    pub allowed_users: Option<&'static [&'static str]>,
}

/// Something a scenario needs that not every platform has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ability {
    /// Group chats.
    Group,
    /// A webhook transport besides the default one.
    Webhook,
    /// The platform delivers an event again (a lost acknowledgement, a replay).
    Redelivery,
    /// Users send pictures.
    Image,
    /// Messages have a length limit, so a long answer is split.
    LengthLimit,
    /// Webhook deliveries carry the time they were signed, under the signature: a
    /// captured one can be told from a fresh one.
    SignedTime,
    /// The bot sends files (the ones the agent presents).
    FilesOut,
    /// Users have ids an operator lists in `allowed_users`.
    AllowedUsers,
    /// A reply shows while it is written (edited in place, or streamed), before its final.
    LiveReplies,
    /// A message carries the time it was sent, so one the platform delivers late (the
    /// backlog after an outage) can be told, and its chat still answered.
    Dated,
    /// The bot can show it is on a message before any of the answer exists (a typing
    /// hint, a reaction, a "working on it" placeholder).
    Presence,
}

/// A platform's end-to-end harness, as the conformance scenarios drive it.
pub trait Conformance: Sized {
    /// The registry name (`channels.<name>`).
    const NAME: &'static str;
    /// The id of the user who speaks, as `allowed_users` lists it (ignored without
    /// [`Ability::AllowedUsers`]).
    const USER: &'static str;
    /// The longest message the platform accepts as the harness configures it, in the
    /// platform's unit (ignored without [`Ability::LengthLimit`]).
    const LIMIT: (LengthUnit, usize);
    /// Log targets besides im-bridge's crates whose lines the log scan reads too (the
    /// platform SDK the adapter logs through).
    const LOG_TARGETS: &'static [&'static str] = &[];

    /// `Ok` when the platform can do `ability`; otherwise why not, which the scenario
    /// prints as the reason it is skipped.
    fn can(ability: Ability) -> Result<(), &'static str>;

    /// Starts the fake, the simulator and the daemon as `setup` says, and returns once the
    /// channel is ready for events (connected, polling, or its webhook served).
    fn start(setup: Setup) -> impl Future<Output = Self>;

    /// The Gateway simulator the daemon talks to.
    fn sim(&self) -> &RunningSimulator;

    /// The user says `text` in `place`.
    fn say(&self, place: Place, text: &str) -> impl Future<Output = ()>;

    /// The user says `text` in the private chat and the platform delivers that event a
    /// second time; returns once the second delivery reached the channel.
    fn say_redelivered(&self, text: &str) -> impl Future<Output = ()>;

    /// The user says `text` in the private chat, delivered to the webhook signed as at
    /// `signed_at`; the HTTP status the daemon answered. Only with [`Ability::SignedTime`]
    /// (and a harness started with [`Transport::Webhook`]).
    fn say_signed_at(&self, text: &str, signed_at: SystemTime) -> impl Future<Output = u16> {
        let _ = (text, signed_at);
        async { panic!("{} signs no delivery time", Self::NAME) }
    }

    /// The user says `text` in the private chat, and the platform delivers it `ago` after
    /// it was sent. Only with [`Ability::Dated`].
    fn say_sent_ago(&self, text: &str, ago: Duration) -> impl Future<Output = ()> {
        let _ = (text, ago);
        async { panic!("{} dates no message", Self::NAME) }
    }

    /// The user sends the picture `bytes` (a JPEG) in the private chat, with no text.
    fn send_image(&self, bytes: Vec<u8>) -> impl Future<Output = ()>;

    /// The bot's messages in `place` as the user sees them now (after edits), oldest first,
    /// as plain text; files and pictures left out.
    fn shown(&self, place: Place) -> Vec<String>;

    /// Whether the user in `place` can see that the bot is on their message: a typing hint
    /// sent to the chat, a reaction on the message, or a message of the bot shown (a
    /// "working on it" placeholder). The default reads only the last; a platform with a
    /// hint or a reaction reads that. Only with [`Ability::Presence`].
    fn on_it(&self, place: Place) -> bool {
        !self.shown(place).is_empty()
    }

    /// How many of the bot's messages in `place` still show that they are being written
    /// (a stream or card never finished); `None` where a message cannot show that.
    fn unfinished(&self, place: Place) -> Option<usize> {
        let _ = place;
        None
    }

    /// The files the bot sent in `place`, as the user would save them: each one's name and
    /// size in bytes, oldest first. Only with [`Ability::FilesOut`].
    fn files_sent(&self, place: Place) -> Vec<(String, usize)> {
        let _ = place;
        panic!("{} sends no files", Self::NAME)
    }

    /// The calls of the channel the fake refused (status or platform error code), one
    /// line each: a channel within the platform's rules has none.
    fn refused(&self) -> Vec<String>;

    /// How many requests the channel has made to the platform's API so far, as the fake
    /// recorded them: HTTP calls (long polls and token requests too), or, where the API is
    /// the long connection itself (WeCom), the frames the channel sent on it. Acks of
    /// pushed events are not counted. `None` where there is no API (the console).
    fn api_calls(&self) -> Option<usize> {
        None
    }

    /// Waits until `done` holds, checking again whenever the fake records something; fails
    /// the test, naming `what`, at the deadline.
    fn wait_until(&self, what: &str, done: impl Fn(&Self) -> bool) -> impl Future<Output = ()>;

    /// The secrets of this run: configured credentials and the tokens the fake issued.
    fn secrets(&self) -> Vec<String>;

    /// Stops the daemon as a signal would and checks that it stopped cleanly. (Dropping
    /// the harness instead asks the daemon to stop without waiting for it.)
    fn stop(self) -> impl Future<Output = ()>;
}
