//! The console's conformance harness: the real daemon serving a `ConsoleChannel` whose
//! terminal is a pair of in-memory pipes, one the test types lines into and one it reads the
//! printed replies from, and the Gateway simulator.
//!
//! The console has one private chat with the person at the terminal, no groups, no
//! pictures, no redelivery (a line is read once) and no length limit, so it plays the
//! answer, `/goal from-chat`, localization, presented file (saved in a folder of the test's
//! own) and log scenarios.

#![cfg(feature = "console")]

use std::sync::{Arc, Mutex};

use im_bridge::simulator::{RunningSimulator, Simulator, SimulatorConfig};
use im_bridge_channel::{LengthUnit, WebhookHost};
use im_bridge_console::ConsoleChannel;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::Notify;

use super::harness::{Ability, Conformance, Place, Setup};
use crate::support::{DEADLINE, Options, PlatformDaemon};

/// Bytes a pipe buffers before its writer waits: more than any test types or reads at once.
const PIPE_BYTES: usize = 1 << 16;

/// The daemon with a console on in-memory pipes, and the simulator.
pub struct Console {
    sim: RunningSimulator,
    keyboard: tokio::sync::Mutex<DuplexStream>,
    screen: Arc<Screen>,
    daemon: PlatformDaemon,
    /// Where the console saves the files the agent presents.
    files: tempfile::TempDir,
}

/// What the console printed, and a signal for each new piece of it.
#[derive(Default)]
struct Screen {
    text: Mutex<String>,
    changed: Notify,
}

impl Conformance for Console {
    const NAME: &'static str = im_bridge_console::NAME;
    // Unused: the console reads no `allowed_users` (see `can`).
    const USER: &'static str = "";
    const LIMIT: (LengthUnit, usize) = (LengthUnit::Chars, usize::MAX);

    fn can(ability: Ability) -> Result<(), &'static str> {
        match ability {
            Ability::Group => Err("a terminal has one chat, with the person at it"),
            Ability::Webhook | Ability::SignedTime => {
                Err("the console reads its terminal, nothing is posted to it")
            }
            Ability::Redelivery => Err("a terminal line is read once; nothing delivers it again"),
            Ability::Image => Err("a terminal sends no pictures"),
            Ability::LengthLimit => Err("a terminal shows a reply of any length in one piece"),
            Ability::FilesOut => Ok(()),
            Ability::LiveReplies => Err("on pipes, not a terminal, the console writes finals only"),
            Ability::Dated => Err("a terminal line is read as it is typed, never late"),
            Ability::Presence => Err(
                "on pipes the console writes nothing before an answer (a terminal shows a status line)",
            ),
            Ability::AllowedUsers => {
                Err("a terminal's one user is whoever runs it; the console reads no allowed_users")
            }
        }
    }

    async fn start(setup: Setup) -> Self {
        let sim = Simulator::start(SimulatorConfig::default()).await.unwrap();
        let (keyboard, input) = tokio::io::duplex(PIPE_BYTES);
        let (output, mut display) = tokio::io::duplex(PIPE_BYTES);
        let files = tempfile::tempdir().unwrap();
        let channel =
            ConsoleChannel::with_io(BufReader::new(input), output, false, "console-user", None)
                .with_commands(im_bridge::manager::commands::vocabulary())
                .with_files_dir(files.path());
        let screen = Arc::new(Screen::default());
        let shown = screen.clone();
        // Ends when the channel drops its end of the pipe.
        tokio::spawn(async move {
            let mut buf = vec![0; 4096];
            while let Ok(n @ 1..) = display.read(&mut buf).await {
                shown
                    .text
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
                shown.changed.notify_waiters();
            }
        });
        let options = Options::default().channel_locale(Self::NAME, setup.locale);
        let daemon = PlatformDaemon::start(&sim, Arc::new(channel), &options, WebhookHost::new());
        Self {
            sim,
            keyboard: tokio::sync::Mutex::new(keyboard),
            screen,
            daemon,
            files,
        }
    }

    fn sim(&self) -> &RunningSimulator {
        &self.sim
    }

    async fn say(&self, _: Place, text: &str) {
        let mut keyboard = self.keyboard.lock().await;
        keyboard
            .write_all(format!("{text}\n").as_bytes())
            .await
            .unwrap();
    }

    async fn say_redelivered(&self, _: &str) {
        unreachable!("{:?}", Self::can(Ability::Redelivery))
    }

    async fn send_image(&self, _: Vec<u8>) {
        unreachable!("{:?}", Self::can(Ability::Image))
    }

    fn shown(&self, _: Place) -> Vec<String> {
        let text = self.screen.text.lock().unwrap();
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn files_sent(&self, _: Place) -> Vec<(String, usize)> {
        let Ok(entries) = std::fs::read_dir(self.files.path()) else {
            return Vec::new();
        };
        let mut files: Vec<_> = entries
            .map(|e| e.unwrap())
            .map(|e| {
                (
                    e.file_name().into_string().unwrap(),
                    e.metadata().unwrap().len() as usize,
                )
            })
            .collect();
        files.sort();
        files
    }

    fn refused(&self) -> Vec<String> {
        Vec::new()
    }

    async fn wait_until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let changed = self.screen.changed.notified();
            if done(self) {
                return;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                panic!(
                    "timed out waiting for {what}; shown: {:#?}",
                    self.shown(Place::Private)
                );
            }
        }
    }

    fn secrets(&self) -> Vec<String> {
        Vec::new()
    }

    async fn stop(self) {
        self.daemon.stop().await;
    }
}
