//! The adapter contract's entry point: a [`Platform`] is what the daemon's registry lists.
//!
//! Adding a platform is one crate and one registry line (`docs/adapter-spec.md`, "Adding
//! a platform"). The daemon never matches on platform names: for each enabled
//! `channels.<name>` block it finds the platform with that [`Platform::name`], hands it
//! the block's adapter keys to [`Platform::validate`] (pure, for `check-config` too), and
//! later builds the channel from what validation returned with a [`BuildContext`].
//!
//! `im-bridge doctor` asks the same validated settings for the adapter's pre-flight checks
//! ([`Configured::doctor`], [`crate::doctor`]).
//!
//! The keys every channel shares (`enabled`, `allowed_users`, `admin_users`, `session`,
//! `locale`, `busy_policy`, …) are read by the daemon and removed from the block first;
//! what an adapter needs of them (`allowed_users`) reaches it through the context.

use std::fmt;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;

use crate::access::AllowedUsers;
use crate::channel::Channel;
use crate::commands::CommandVocabulary;
use crate::config::Issues;
use crate::doctor::{Check, Context, DoctorFn, no_checks};
use crate::error::ChannelError;
use crate::menu::CommandMenu;
use crate::state::{ChannelState, MemoryState};
use crate::webhook::WebhookHost;

/// A chat platform the daemon can serve, as its registry lists it.
pub trait Platform: Send + Sync + 'static {
    /// The provider key: the `channels.<name>` block and [`Channel::name`].
    fn name(&self) -> &'static str;

    /// Validates the adapter's keys of its block (the shared keys already removed).
    ///
    /// Pure: it opens no file or socket. Every problem goes into `issues` with its full key
    /// path (warnings too, e.g. unknown keys); `None` when the block has errors.
    fn validate(&self, block: Value, issues: &mut Issues) -> Option<Arc<dyn Configured>>;

    /// Whether its channel answers only the users `allowed_users` lists, when the key is
    /// set: every platform whose users have ids does. One that has a single user (the
    /// console: whoever runs it) does not, and the daemon warns that the key has no effect.
    fn checks_allowed_users(&self) -> bool {
        true
    }
}

/// A validated channel: printable for `check-config`, and ready to build.
pub trait Configured: Send + Sync + fmt::Debug {
    /// The effective settings, secrets redacted, as `check-config` prints them.
    fn effective(&self) -> Value;

    /// Builds the channel. No network yet: transports start in [`Channel::run`]; a webhook
    /// route is registered on the context's host here.
    fn build(&self, ctx: &BuildContext) -> Result<Arc<dyn Channel>, ChannelError>;

    /// The adapter's pre-flight checks for `im-bridge doctor` (its credentials, its
    /// webhook state, what it keeps in `ctx`'s state): one cheap call each, changing
    /// nothing on the platform. None by default.
    fn doctor<'a>(&'a self, ctx: &'a Context) -> BoxFuture<'a, Vec<Check>> {
        let _ = ctx;
        Box::pin(async { Vec::new() })
    }
}

/// Builds a channel from its settings.
pub type BuildFn<S> = fn(&S, &BuildContext) -> Result<Arc<dyn Channel>, ChannelError>;

/// The usual [`Platform`]: a name, the validator of the adapter's keys, the function that
/// builds its channel from the settings, and its `doctor` checks. An adapter's registry
/// entry is one constant:
///
/// ```ignore
/// pub const PLATFORM: Adapter<FeishuSettings> = Adapter {
///     name: NAME,
///     validate: config::validate,
///     build: |settings, ctx| Ok(Arc::new(FeishuChannel::new(settings.clone(), ctx)?)),
///     doctor: doctor::checks,
/// };
/// ```
pub struct Adapter<S> {
    /// The provider key: the `channels.<name>` block and [`Channel::name`].
    pub name: &'static str,
    /// Reads and validates the adapter's keys (pure, as [`Platform::validate`]).
    pub validate: fn(Value, &mut Issues) -> Option<S>,
    /// Builds the channel from the settings.
    pub build: BuildFn<S>,
    /// The pre-flight checks of `im-bridge doctor` ([`no_checks`] for none).
    pub doctor: DoctorFn<S>,
}

impl<S> fmt::Debug for Adapter<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Adapter").field("name", &self.name).finish()
    }
}

impl<S: Serialize + fmt::Debug + Send + Sync + 'static> Platform for Adapter<S> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn validate(&self, block: Value, issues: &mut Issues) -> Option<Arc<dyn Configured>> {
        let settings = (self.validate)(block, issues)?;
        Some(Arc::new(
            Prepared::new(settings, self.build).with_doctor(self.doctor),
        ))
    }
}

/// The usual [`Configured`]: an adapter's settings, the function that builds it and its
/// pre-flight checks.
pub struct Prepared<S> {
    settings: S,
    build: BuildFn<S>,
    doctor: DoctorFn<S>,
}

impl<S> Prepared<S> {
    /// Settings and their builder, with no pre-flight checks.
    pub fn new(settings: S, build: BuildFn<S>) -> Self {
        Self {
            settings,
            build,
            doctor: no_checks,
        }
    }

    /// The same, with `doctor` as its pre-flight checks.
    pub fn with_doctor(self, doctor: DoctorFn<S>) -> Self {
        Self { doctor, ..self }
    }

    /// The settings.
    pub fn settings(&self) -> &S {
        &self.settings
    }
}

impl<S: fmt::Debug> fmt::Debug for Prepared<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prepared")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl<S: Serialize + fmt::Debug + Send + Sync + 'static> Configured for Prepared<S> {
    fn effective(&self) -> Value {
        serde_json::to_value(&self.settings).unwrap_or(Value::Null)
    }

    fn build(&self, ctx: &BuildContext) -> Result<Arc<dyn Channel>, ChannelError> {
        (self.build)(&self.settings, ctx)
    }

    fn doctor<'a>(&'a self, ctx: &'a Context) -> BoxFuture<'a, Vec<Check>> {
        (self.doctor)(&self.settings, ctx)
    }
}

/// What the daemon hands an adapter when it builds the channel.
#[derive(Clone)]
#[non_exhaustive]
pub struct BuildContext {
    /// Who may talk to the bot (the block's `allowed_users`); messages from anyone else are
    /// dropped by the adapter.
    pub allowed_users: AllowedUsers,
    /// The daemon's commands, to classify messages with.
    pub commands: CommandVocabulary,
    /// The daemon's command menu, localized, for platforms with a command picker.
    pub menu: CommandMenu,
    /// The shared inbound HTTP host webhook routes are registered on.
    pub webhooks: WebhookHost,
    /// The channel's persistent state (a cursor, a token it logged in for), already scoped
    /// to this channel ([`crate::state`]); in memory by default.
    pub state: Arc<dyn ChannelState>,
}

impl Default for BuildContext {
    fn default() -> Self {
        Self {
            allowed_users: AllowedUsers::default(),
            commands: CommandVocabulary::default(),
            menu: CommandMenu::default(),
            webhooks: WebhookHost::default(),
            state: Arc::new(MemoryState::new()),
        }
    }
}

impl fmt::Debug for BuildContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuildContext")
            .field("allowed_users", &self.allowed_users)
            .field("commands", &self.commands)
            .finish_non_exhaustive()
    }
}

impl BuildContext {
    /// A context with everything given, its state in memory ([`BuildContext::with_state`]
    /// gives it another).
    pub fn new(
        allowed_users: AllowedUsers,
        commands: CommandVocabulary,
        menu: CommandMenu,
        webhooks: WebhookHost,
    ) -> Self {
        Self {
            allowed_users,
            commands,
            menu,
            webhooks,
            state: Arc::new(MemoryState::new()),
        }
    }

    /// The same context with `state` as the channel's persistent state.
    pub fn with_state(self, state: Arc<dyn ChannelState>) -> Self {
        Self { state, ..self }
    }
}
