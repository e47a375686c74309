//! The Feishu end-to-end harness: the real daemon running a real `FeishuChannel` on the
//! long connection to the fake Feishu, and the Gateway simulator, all over loopback.

use std::sync::Arc;
use std::time::Duration;

use im_bridge::config::StoreLocation;
use im_bridge::daemon::{self, DaemonError, DaemonExit};
use im_bridge::i18n::{Catalogs, command_menu};
use im_bridge::simulator::{RunningSimulator, Simulator, SimulatorConfig};
use im_bridge_channel::{AllowedUsers, BuildContext, Channel, Secret, WebhookHost};
use im_bridge_fakes::feishu::{APP_ID, APP_SECRET, ClientConfig, FakeFeishu};
use im_bridge_feishu::FeishuChannel;
use im_bridge_feishu::config::{FeishuSettings, Transport};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long one wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The daemon with a Feishu channel, the fake Feishu and the Gateway simulator.
pub struct Fs {
    /// The fake Feishu.
    pub fake: FakeFeishu,
    /// The Gateway simulator.
    pub sim: RunningSimulator,
    shutdown: CancellationToken,
    daemon: Option<JoinHandle<Result<DaemonExit, DaemonError>>>,
    _dir: tempfile::TempDir,
}

impl Fs {
    /// Everything started, the channel connected.
    pub async fn start() -> Self {
        let fake = FakeFeishu::start().await.unwrap();
        // Quick reconnects, so the reconnect test waits a second at most.
        fake.set_client_config(ClientConfig {
            reconnect_interval: 1,
            reconnect_nonce: 0,
            ..ClientConfig::default()
        });
        let sim = Simulator::start(SimulatorConfig::default()).await.unwrap();
        let settings = FeishuSettings {
            app_id: APP_ID.to_owned(),
            app_secret: Secret::new(APP_SECRET),
            domain: fake.domain(),
            transport: Transport::Websocket,
        };
        let ctx = BuildContext::new(
            AllowedUsers::Anyone,
            im_bridge::manager::commands::vocabulary(),
            command_menu(&Catalogs::embedded().unwrap()),
            WebhookHost::new(),
        );
        let channel = FeishuChannel::new(settings, &ctx).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let config = crate::support::daemon_config(
            &sim,
            StoreLocation::Sqlite(dir.path().join("bridge.db")),
            &crate::support::Options::default(),
        );
        let shutdown = CancellationToken::new();
        let channels: Vec<Arc<dyn Channel>> = vec![Arc::new(channel)];
        let daemon = tokio::spawn(daemon::run(config, channels, shutdown.clone()));
        fake.wait_connected(1, DEADLINE).await.unwrap();
        Self {
            fake,
            sim,
            shutdown,
            daemon: Some(daemon),
            _dir: dir,
        }
    }

    /// Stops the daemon as a signal would and checks it stopped cleanly.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        let daemon = self.daemon.take().unwrap();
        let exit = tokio::time::timeout(DEADLINE, daemon)
            .await
            .unwrap()
            .unwrap();
        assert!(exit.is_ok(), "daemon failed: {exit:?}");
    }
}

impl Drop for Fs {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
