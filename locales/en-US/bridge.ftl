# im-bridge — English (United States). Every sentence the bot says lives here.
# Ids are grouped by prefix: run- (agent runs), err- (failures), cmd- (commands),
# goal- (the /goal family), lang- (/lang), compact- (/compact), menu- (command picker),
# help- (the /help list).
# Placeables are documented next to each id in src/i18n/msg.rs.

## Agent runs

run-busy = This conversation is still busy with an earlier request. Please wait until it finishes, then send your message again.
run-no-response = The agent finished without writing a reply.
run-failed = Something went wrong while the agent was working on this. Please try again.
run-interrupted = (This answer was cut off: something went wrong before the agent finished.)
run-stopped = (Stopped at your request.)
run-truncated = (The answer was too long for this chat, so I cut it here.)
run-recovered = (Sorry this is late: the bridge restarted while your answer was on its way.)
run-queued = Another request in this conversation is still running. I'll start on yours as soon as it's done.
run-handoff =
    { $where ->
        [group] (Still working on this, and I can only reply to a message here for a few minutes after it was sent. I'll send { $shown ->
            [yes] the rest
           *[no] the answer
        } with my reply to the next message anyone here sends me.)
        [soon] (Still working on this. I'll send { $shown ->
            [yes] the rest
           *[no] the answer
        } here as soon as it's ready.)
       *[private] (Still working on this, and I can only reply to a message here for a limited time after it was sent. I'll send { $shown ->
            [yes] the rest
           *[no] the answer
        } with my reply to your next message.)
    }
run-rest =
    { $more ->
        [no] (About my earlier answer: that was all of it. Nothing more came after it.)
       *[yes] (Continuing my earlier answer:)
    }
run-held = (This answers an earlier message. It was ready only after I could no longer reply to that message.)
run-thread-replaced = I couldn't find this chat's earlier conversation on the agent's side any more, so I've started a new one with your message. Earlier messages aren't carried over.
run-too-late = What was sent here while I was offline reached me too late, so I didn't act on it. If it still matters, please send it again.
run-thinking = Working on it…
run-files-created =
    { $count ->
        [one] Created a file: 📎 { $names }
       *[other] Created { $count } files: 📎 { $names }
    }
run-file-too-large = { $name } is too big to send here (the limit is { $limit } MB), so it isn't attached.
run-file-missing = I couldn't find { $name } among the agent's files, so it isn't attached.
run-file-unavailable = I couldn't fetch { $name } from the agent just now, so it isn't attached.
run-file-refused = The chat app didn't accept { $name }, so it isn't attached.
# Appended to the user's message for the agent when an attachment did not come through.
run-attachment-unavailable = [The attachment “{ $name }” could not be read, so it is not included.]
run-attachment-too-large = [The attachment “{ $name }” is too large to pass on, so it is not included.]

## Failures

err-internal = Sorry, something went wrong on my side. Please try again.
err-gateway-unavailable = I can't reach the agent right now. Please try again in a little while.
err-too-busy = I'm handling too many messages right now. Please try again in a minute.
err-invalid-agent = This chat is set up with an agent name that isn't valid, so I can't run it. Please ask an admin to check the bot's configuration.

## Commands

cmd-new-done = Started a new conversation. Earlier messages won't carry over.
cmd-new-failed = I couldn't start a new conversation. Please try again.
cmd-status-active = This chat is in conversation { $thread }.
cmd-status-none = This chat has no conversation yet. Send me a message to start one.
cmd-stop-none = Nothing is running in this conversation right now, so there is nothing to stop.
cmd-stop-elsewhere = I've stopped the task that was running in this conversation.
cmd-stop-failed = I couldn't stop the current task. It may still finish on its own; try /stop again in a moment.
cmd-unknown = I don't know the command { $command }. These are the ones I know: { $commands }
cmd-unknown-empty = That command is empty. These are the ones I know: { $commands }
cmd-models-list =
    Available models:
    { $models }
cmd-models-none = No models are configured yet.
cmd-models-failed = I couldn't get the list of models. Please try again.
cmd-memory-facts =
    { $count ->
        [0] I don't remember anything about you yet.
        [one] I remember one fact about you.
       *[other] I remember { $count } facts about you.
    }
cmd-memory-failed = I couldn't read my memory right now. Please try again.
cmd-skill-disabled = The skill { $command } is installed but turned off. Enable it first, then try again.
cmd-skill-lookup-failed = I couldn't check the installed skills right now. Please try again.

## The /goal family

goal-status-none = There's no active goal in this conversation.
goal-status-active = Current goal: { $objective }
goal-status-progress =
    Current goal: { $objective }
    Still working on it ({ $n }/{ $max } automatic follow-ups used).
goal-status-stopped =
    Current goal: { $objective }
    I stopped following up on my own after { $n }/{ $max } attempts: { $reason ->
        [missing_evidence] I couldn't find enough evidence that it's done.
        [needs_user_input] I need your input to go on.
        [run_failed] the last attempt failed.
        [external_wait] it's waiting on something outside my control.
        [goal_not_met_yet] it isn't met yet.
        [no_verdict] I couldn't tell whether it's met.
        [max_continuations_reached] I used all my automatic follow-ups.
        [no_progress_detected] I stopped making progress.
        [token_capped] I hit the usage limit for this task.
        [evaluator_failed] checking the goal failed.
        [no_durable_end_of_turn] my last turn didn't finish cleanly.
        [thread_changed] the conversation changed while I was checking.
       *[unknown] no reason was recorded.
    }
    Send a message to keep going, or /goal clear to drop it.
goal-status-met = Goal met: { $objective }
goal-status-failed = I couldn't look up the goal right now. Please try again.
goal-cleared = The goal is cleared.
goal-clear-failed = I couldn't clear the goal. Please try again.
goal-busy-unchanged = A task is still running in this conversation, so I left the goal as it was. Send /stop to stop it, or wait for it to finish, then try again.
goal-set-failed = I couldn't set the goal, so I haven't started on it. Please try again.
goal-too-long = That goal is too long. Please keep it under { $max } characters.
goal-hint-too-long = That hint is too long. Please keep it under { $max } characters.
goal-continuing =
    { $max ->
        [0] ↻ Still working toward the goal (follow-up { $n })
       *[other] ↻ Still working toward the goal (follow-up { $n } of { $max })
    }
goal-from-chat-saved = Goal set from our conversation: { $objective }
goal-from-chat-busy = A task is still running in this conversation. Please try /goal from-chat again once it has finished.
goal-from-chat-pending-input = I'm still waiting for your answer to my last question. Please answer it first, then try /goal from-chat again.
goal-from-chat-pending-approval = An action is waiting for your approval. Please approve or reject it first, then try /goal from-chat again.
goal-from-chat-goal-changed = The goal changed while I was working one out, so I left it as it is. Send /goal to see the current goal.
goal-from-chat-no-context = There's nothing in this conversation yet to build a goal from. Tell me what you're working on first, or set one directly with /goal <condition>.
goal-from-chat-unclear = I couldn't find a clear goal in our conversation. Try /goal from-chat with a short hint, or set one directly with /goal <condition>.
goal-from-chat-synthesis-failed = I couldn't work out a goal from our conversation this time. Please try again, or set one directly with /goal <condition>.
goal-from-chat-forbidden = You don't have permission to set a goal in this conversation.
goal-from-chat-timeout = Working out the goal is taking longer than expected. It may still be saved in a moment — send /goal to check before trying again.
goal-from-chat-failed = I couldn't set a goal from our conversation. Please try again, or set one directly with /goal <condition>.
goal-from-chat-unsupported = The DeerFlow version this bot talks to can't work out a goal from the chat. Set one directly with /goal <condition>.
goal-from-chat-binding-changed = I saved this goal in the previous conversation, because this chat moved to a new one while I was working it out: { $objective }. I haven't started on it here.
goal-from-chat-not-started-busy = The goal is saved: { $objective }. I haven't started on it yet, because another task is still running in this conversation. Once that's done, send me a message and I'll get to work on the goal.
goal-from-chat-not-started-unavailable = The goal is saved: { $objective }. But I can't reach the agent right now, so I couldn't start working on it. Please send me a message in a little while and I'll pick it up.
goal-from-chat-not-started-invalid-agent = The goal is saved: { $objective }. But this chat is set up with an agent name that isn't valid, so I can't start working on it. Please ask an admin to check the bot's configuration.
goal-from-chat-not-started-failed = The goal is saved: { $objective }. But something went wrong when I tried to start working on it. Please send me a message to try again.
goal-from-chat-not-started-stopped = The goal is saved: { $objective }. As you asked, I haven't started working on it. Send me a message whenever you'd like me to begin.

## /lang

lang-current =
    I'm replying in { $locale } { $source ->
        [chat] because this chat chose it with /lang.
        [owner] because that's the language in your DeerFlow settings.
        [sender] because that's your app's language.
        [channel] because it's this bot's language setting.
        [admin] because it's the default the admin chose.
       *[default] because it's the built-in default.
    }
lang-set = Okay, I'll reply in { $locale } in this chat.
lang-auto = This chat no longer has its own language. I'll reply in { $locale }.
lang-not-allowed = Only this bot's admins can change the language in a group chat.
lang-unsupported = I can't reply in { $tag } yet. Languages I can use: { $supported }
# This language's name for itself, as a language picker shows it.
locale-name = English
# Joins the items of a list in a sentence (the quotes keep the space).
list-separator = {", "}
# What a bare /bootstrap asks the agent to do (DeerFlow's own wording in English).
bootstrap-default-input = Initialize workspace

## /compact

compact-usage = To condense this conversation, send /compact, or /compact keep N to keep the last N messages as they are (N from 1 to { $max }).
compact-nothing = There's no conversation to condense yet.
compact-done =
    Condensed the older part of this conversation: { $removed ->
        [one] one message was
       *[other] { $removed } messages were
    } summarized and { $kept ->
        [one] the latest one was kept as it is
       *[other] the latest { $kept } were kept as they are
    }. The chat history itself is unchanged.
compact-not-needed = There isn't enough in this conversation to condense yet.
compact-disabled = Condensing conversations isn't available on this DeerFlow server (it is turned off, or the server is too old for it).
compact-busy = A task is still running in this conversation. Please send /compact again once it has finished.
compact-timeout = Condensing is taking longer than expected. It may still finish on its own; check again in a little while.
compact-failed = I couldn't condense this conversation, so nothing changed. Please try again later.

## Command picker (Telegram's menu): short descriptions

menu-new = Start a fresh conversation
menu-status = Show this chat's conversation
menu-goal = Set, show or clear a goal
menu-compact = Condense older context
menu-models = List the available models
menu-memory = Show what I remember about you
menu-lang = Show or change my reply language
menu-bootstrap = Set up your workspace
menu-help = List what I can do
menu-stop = Stop the task in progress

## /help: a header, one entry per command (each line starts with the command), a footer

help-header = Here's what I understand:
help-new = /new — start a fresh conversation
help-goal =
    /goal <condition> — set a goal and let me keep working until it's met
    /goal — show the current goal and how it's going
    /goal from-chat [hint] — turn our conversation so far into a goal
    /goal clear — remove the goal
help-status = /status — show which conversation this chat is in
help-stop = /stop (or /cancel) — stop the task in progress; what it wrote so far stays
help-compact = /compact [keep N] — condense older context; the chat history stays
help-context = /context compact [keep N] — the same as /compact
help-models = /models — list the available models
help-memory = /memory — show how much I remember about you
help-lang = /lang [language | auto] — show or change the language I reply in
help-bootstrap = /bootstrap [text] — set up your workspace
help-help = /help — show this list
help-footer = Installed skills work as commands too: /<skill> <task>
