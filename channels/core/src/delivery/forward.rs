//! `forward_channel!`: the [`Channel`](crate::Channel) methods a layer passes on unchanged.
//!
//! Each delivery layer wraps one channel and changes a few of its calls; everything else
//! (identity, transport, attachment fetches, and the sends it leaves alone) goes
//! to the wrapped channel as it is. Rather than spell each of those out again, a layer names them, the way
//! teloxide's adaptors use `requester_forward!`:
//!
//! ```text
//! #[async_trait]
//! impl<C: Channel> Channel for RetryFinals<C> {
//!     forward_channel!(inner() => identity, name, capabilities, is_connected, run, start_stream, edit_text);
//!
//!     async fn send_text(/* … */) { /* retried */ }
//!     // …
//! }
//! ```
//!
//! `inner()` is the layer's accessor for the wrapped channel (`as_ref()` for an `Arc`). A
//! misspelt or doubled name does not compile. A method that is neither named nor written
//! falls back to the trait default (`start_stream` sends, `edit_text` is unsupported,
//! `fetch_file` reads inline bytes only), which is not a pass-through: the test below
//! calls every method through every layer.
//!
//! # Why the methods are in async-trait's expanded form
//!
//! `#[async_trait]` rewrites the impl it is put on before the macros inside that impl
//! expand, so the `async fn`s this macro would emit would be left unrewritten and not
//! match the trait. It emits what async-trait would have written instead: a plain `fn`
//! with every borrowed input's lifetime named and outliving `'async_trait`, returning a
//! [`ChannelFuture`]. The body hands back the wrapped channel's own future, which is that
//! same type, rather than boxing another future around it. Should async-trait change that
//! form, these methods stop compiling; they cannot silently misbehave.

use std::pin::Pin;

use crate::error::ChannelResult;

/// The future an async [`Channel`](crate::Channel) method returns once async-trait has
/// expanded it.
pub(crate) type ChannelFuture<'a, T> = Pin<Box<dyn Future<Output = ChannelResult<T>> + Send + 'a>>;

/// Emits the named [`Channel`](crate::Channel) methods, each passing its call on to
/// `self.$inner()` unchanged (see the module docs).
macro_rules! forward_channel {
    ($inner:ident() => $($method:ident),+ $(,)?) => {
        $($crate::delivery::forward::forward_channel!(@ $inner $method);)+
    };
    (@ $inner:ident identity) => {
        fn identity(&self) -> &$crate::channel::ChannelIdentity {
            $crate::channel::Channel::identity(self.$inner())
        }
    };
    (@ $inner:ident name) => {
        fn name(&self) -> &'static str {
            $crate::channel::Channel::name(self.$inner())
        }
    };
    (@ $inner:ident capabilities) => {
        fn capabilities(&self) -> $crate::capabilities::Capabilities {
            $crate::channel::Channel::capabilities(self.$inner())
        }
    };
    (@ $inner:ident is_connected) => {
        fn is_connected(&self) -> bool {
            $crate::channel::Channel::is_connected(self.$inner())
        }
    };
    (@ $inner:ident exclusive_transport) => {
        fn exclusive_transport(&self) -> bool {
            $crate::channel::Channel::exclusive_transport(self.$inner())
        }
    };
    (@ $inner:ident run) => {
        $crate::delivery::forward::forward_channel!(@async $inner run<>(
            sink: $crate::inbound::InboundSink,
            shutdown: ::tokio_util::sync::CancellationToken,
        ) -> $crate::channel::ChannelExit);
    };
    (@ $inner:ident send_text) => {
        $crate::delivery::forward::forward_channel!(@send $inner send_text);
    };
    (@ $inner:ident start_stream) => {
        $crate::delivery::forward::forward_channel!(@send $inner start_stream);
    };
    (@ $inner:ident edit_text) => {
        $crate::delivery::forward::forward_channel!(@edit $inner edit_text);
    };
    (@ $inner:ident finish_stream) => {
        $crate::delivery::forward::forward_channel!(@edit $inner finish_stream);
    };
    (@ $inner:ident send_file) => {
        $crate::delivery::forward::forward_channel!(@async $inner send_file<'t, 'f>(
            to: $crate::channel::SendTarget<'t>,
            file: &'f $crate::message::OutboundFile,
        ) -> ());
    };
    (@ $inner:ident show_typing) => {
        $crate::delivery::forward::forward_channel!(@async $inner show_typing<'t>(
            to: $crate::channel::SendTarget<'t>,
        ) -> ());
    };
    (@ $inner:ident turn_ended) => {
        $crate::delivery::forward::forward_channel!(@async $inner turn_ended<'t>(
            to: $crate::channel::SendTarget<'t>,
        ) -> ());
    };
    (@ $inner:ident react) => {
        $crate::delivery::forward::forward_channel!(@async $inner react<'t>(
            to: $crate::channel::SendTarget<'t>,
            reaction: $crate::channel::Reaction,
        ) -> ());
    };
    (@ $inner:ident thread_of) => {
        fn thread_of<'t>(
            &self,
            to: $crate::channel::SendTarget<'t>,
        ) -> ::std::option::Option<::std::borrow::Cow<'t, str>> {
            $crate::channel::Channel::thread_of(self.$inner(), to)
        }
    };
    // A file's bytes, and the same with what reading it told (`fetch_labeled`): one
    // name forwards both, so a layer never drops an adapter's label.
    (@ $inner:ident fetch_file) => {
        $crate::delivery::forward::forward_channel!(@async $inner fetch_file<'f>(
            file: &'f $crate::message::InboundFile,
            max_bytes: u64,
        ) -> ::bytes::Bytes);
        $crate::delivery::forward::forward_channel!(@async $inner fetch_labeled<'f>(
            file: &'f $crate::message::InboundFile,
            max_bytes: u64,
        ) -> (::bytes::Bytes, $crate::message::FileLabel));
    };
    // `send_text` and `start_stream`: a text to a target, answered by the new message.
    (@send $inner:ident $method:ident) => {
        $crate::delivery::forward::forward_channel!(@async $inner $method<'t, 'x>(
            to: $crate::channel::SendTarget<'t>,
            text: &'x str,
        ) -> $crate::channel::SentMessage);
    };
    // `edit_text` and `finish_stream`: a new text for a message already sent.
    (@edit $inner:ident $method:ident) => {
        $crate::delivery::forward::forward_channel!(@async $inner $method<'t, 'm, 'x>(
            to: $crate::channel::SendTarget<'t>,
            id: &'m $crate::ids::MessageId,
            text: &'x str,
        ) -> ());
    };
    // One async method as async-trait expands it: `'s` is the receiver's lifetime, `$lt`
    // those of the borrowed arguments, in order; all outlive the returned future.
    (@async $inner:ident $method:ident<$($lt:lifetime),*>(
        $($arg:ident: $ty:ty),* $(,)?
    ) -> $out:ty) => {
        fn $method<'s, $($lt,)* 'async_trait>(
            &'s self,
            $($arg: $ty),*
        ) -> $crate::delivery::forward::ChannelFuture<'async_trait, $out>
        where
            's: 'async_trait,
            $($lt: 'async_trait,)*
            Self: 'async_trait,
        {
            $crate::channel::Channel::$method(self.$inner(), $($arg),*)
        }
    };
}

pub(crate) use forward_channel;

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;
    use std::sync::Arc;

    use tokio_util::sync::CancellationToken;

    use crate::channel::{Channel, ChannelExit, Reaction};
    use crate::delivery::recorder::{Call, Recorder, attachment, handle, out_to, target, unpaced};
    use crate::delivery::{BudgetPlan, ChannelExt, RetryPolicy};
    use crate::inbound::inbound_queue;
    use crate::message::ChatKind;

    /// A recorder that reports itself disconnected and exclusive, so a layer that does not
    /// pass `is_connected` or `exclusive_transport` on shows up as the trait default.
    struct Offline(Arc<Recorder>);

    impl Offline {
        fn recorder(&self) -> &Arc<Recorder> {
            &self.0
        }
    }

    #[async_trait::async_trait]
    impl Channel for Offline {
        forward_channel!(recorder() => identity, name, capabilities, run, send_text, start_stream, edit_text,
            finish_stream, send_file, show_typing, turn_ended, react, thread_of, fetch_file);

        fn is_connected(&self) -> bool {
            false
        }

        fn exclusive_transport(&self) -> bool {
            true
        }
    }

    #[tokio::test]
    async fn every_layer_passes_on_what_it_does_not_change() {
        let rec = Recorder::new(unpaced());
        let shared: Arc<dyn Channel> = Arc::new(Offline(rec.clone()));
        let stack = shared
            .fenced()
            .newest(Arc::default())
            .budgets(BudgetPlan::default())
            .throttle()
            .retry_finals(RetryPolicy::default())
            .finish_or_send()
            .limit_length();
        assert_eq!(
            (stack.name(), stack.capabilities(), stack.is_connected()),
            ("recorder", unpaced(), false)
        );
        // The identity itself is the recorder's (always connected, not exclusive).
        let identity = stack.identity();
        assert_eq!(
            (identity.name(), identity.is_connected()),
            ("recorder", true)
        );
        assert!(!identity.exclusive_transport());
        assert!(stack.exclusive_transport());
        let (sink, _queue) = inbound_queue(NonZeroUsize::MIN);
        let exit = stack.run(sink, CancellationToken::new()).await.unwrap();
        assert_eq!(exit, ChannelExit::Stopped);
        let to = target();
        stack.send_text(to, "a").await.unwrap();
        let m = stack.start_stream(to, "b").await.unwrap().id;
        stack.edit_text(to, &m, "bc").await.unwrap();
        stack.finish_stream(to, &m, "bcd").await.unwrap();
        stack.send_file(to, &attachment("f.txt")).await.unwrap();
        stack.show_typing(to).await.unwrap();
        stack.turn_ended(to).await.unwrap();
        stack.react(to, Reaction::Queued).await.unwrap();
        // The recorder reads a thread from the metadata: the trait default knows none.
        let mut threaded = out_to("s1", ChatKind::Group, "", true);
        threaded.metadata.insert("thread".into(), "t1".into());
        assert_eq!(stack.thread_of((&threaded).into()).as_deref(), Some("t1"));
        // The recorder answers a handle with its id: the trait default would refuse it.
        let bytes = stack.fetch_file(&handle("h1"), 2).await.unwrap();
        assert_eq!(bytes, "h1");
        let (_, label) = stack.fetch_labeled(&handle("h1"), 2).await.unwrap();
        assert_eq!(
            label.filename.as_deref(),
            Some("h1.txt"),
            "the label passes too"
        );
        assert_eq!(
            rec.calls(),
            [
                Call::Send("a".into()),
                Call::Start("b".into()),
                Call::Edit("m2".into(), "bc".into()),
                Call::Finish("m2".into(), "bcd".into()),
                Call::File("f.txt".into()),
                Call::Typing,
                Call::TurnEnded,
                Call::React(Reaction::Queued),
                Call::Fetch("h1".into(), 2),
                Call::Fetch("h1".into(), 2),
            ]
        );
    }
}
