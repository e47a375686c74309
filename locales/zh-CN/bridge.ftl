# im-bridge — 简体中文。机器人说的每一句话都在这里。
# 消息 id 按前缀分组：run-（智能体运行）、err-（故障）、cmd-（命令）、
# goal-（/goal 系列）、lang-（/lang）、compact-（/compact）、menu-（命令菜单）、
# help-（/help 列表）。
# 各消息可用的变量见 src/i18n/msg.rs。

## 智能体运行

run-busy = 这个对话还在处理上一个请求，请等它完成后再发一次。
run-no-response = 智能体已经完成，但没有写下回复。
run-failed = 处理这个请求时出了问题，请再试一次。
run-interrupted = （回答没有写完：智能体完成之前出了问题。）
run-stopped = （已按你的要求停止。）
run-truncated = （回答太长，在这里截断了。）
run-recovered = （抱歉来晚了：回答送达途中桥接服务重启了一次。）
run-queued = 这个对话里还有一个请求在进行，它一结束我就开始处理你的消息。
run-handoff =
    { $where ->
        [group] （还在处理。我只能在消息发出后的几分钟内回复它，所以等群里有人再给我发消息时，我会在回复里附上{ $shown ->
            [yes] 剩下的部分
           *[no] 回答
        }。）
        [soon] （还在处理，{ $shown ->
            [yes] 剩下的部分
           *[no] 回答
        }一准备好就发到这里。）
       *[private] （还在处理。我只能在消息发出后的一段时间内回复它，所以你下次给我发消息时，我会在回复里附上{ $shown ->
            [yes] 剩下的部分
           *[no] 回答
        }。）
    }
run-rest =
    { $more ->
        [no] （关于之前的回答：那就是全部内容了，后面没有更多。）
       *[yes] （接着之前的回答：）
    }
run-held = （这是对之前一条消息的回答。它完成时，我已经没法再回复那条消息了。）
run-thread-replaced = 在智能体那边找不到这个聊天之前的对话了，所以我用你这条消息开始了一个新对话，之前的消息不会带过来。
run-too-late = 我离线期间发到这里的消息到得太晚了，我就没有处理。还需要的话，请重新发一次。
run-thinking = 正在处理…
run-files-created = 已创建 { $count } 个文件：📎 { $names }
run-file-too-large = { $name } 太大了，超过了这里 { $limit } MB 的上限，所以没有附上。
run-file-missing = 在智能体的文件里找不到 { $name }，所以没有附上。
run-file-unavailable = 暂时没能从智能体那里取到 { $name }，所以没有附上。
run-file-refused = 聊天应用没有接收 { $name }，所以没有附上。
run-attachment-unavailable = [附件“{ $name }”无法读取，未包含在内。]
run-attachment-too-large = [附件“{ $name }”太大，无法转交，未包含在内。]

## 故障

err-internal = 抱歉，我这边出了点问题，请再试一次。
err-gateway-unavailable = 暂时连不上智能体，请稍后再试。
err-too-busy = 现在消息太多，忙不过来，请过一分钟再试。
err-invalid-agent = 这个聊天配置的智能体名称无效，所以无法运行。请联系管理员检查机器人的配置。

## 命令

cmd-new-done = 已开始新的对话，之前的消息不会带过来。
cmd-new-failed = 没能开始新的对话，请再试一次。
cmd-status-active = 这个聊天当前所在的对话是 { $thread }。
cmd-status-none = 这个聊天还没有对话。给我发条消息就能开始。
cmd-stop-none = 这个对话现在没有正在进行的任务，没有什么需要停止。
cmd-stop-elsewhere = 已经停下这个对话里正在进行的任务。
cmd-stop-failed = 没能停止当前的任务，它可能会自己结束。稍后可以再发一次 /stop。
cmd-unknown = 我不认识 { $command } 这个命令。我能处理的命令有：{ $commands }
cmd-unknown-empty = 这是一个空命令。我能处理的命令有：{ $commands }
cmd-models-list =
    可用的模型：
    { $models }
cmd-models-none = 还没有配置任何模型。
cmd-models-failed = 没能获取模型列表，请再试一次。
cmd-memory-facts =
    { $count ->
        [0] 我还没有记住关于你的任何信息。
       *[other] 我记住了 { $count } 条关于你的信息。
    }
cmd-memory-failed = 暂时读不到我的记忆，请再试一次。
cmd-skill-disabled = 技能 { $command } 已安装但处于关闭状态，请先启用再试。
cmd-skill-lookup-failed = 暂时查不到已安装的技能，请再试一次。

## /goal 系列

goal-status-none = 这个对话目前没有目标。
goal-status-active = 当前目标：{ $objective }
goal-status-progress =
    当前目标：{ $objective }
    仍在推进中（已自动跟进 { $n }/{ $max } 次）。
goal-status-stopped =
    当前目标：{ $objective }
    自动跟进 { $n }/{ $max } 次后已停止，原因是{ $reason ->
        [missing_evidence] 找不到足够的证据证明目标已完成。
        [needs_user_input] 需要你提供信息才能继续。
        [run_failed] 上一次尝试失败了。
        [external_wait] 正在等待我无法控制的外部条件。
        [goal_not_met_yet] 目标还没有达成。
        [no_verdict] 无法判断目标是否达成。
        [max_continuations_reached] 自动跟进的次数已经用完。
        [no_progress_detected] 已经没有进展了。
        [token_capped] 这个任务的用量达到了上限。
        [evaluator_failed] 检查目标时出错了。
        [no_durable_end_of_turn] 上一轮没有正常结束。
        [thread_changed] 检查期间对话发生了变化。
       *[unknown] 没有记录具体原因。
    }
    发条消息我就继续，或者发送 /goal clear 放弃这个目标。
goal-status-met = 目标已达成：{ $objective }
goal-status-failed = 暂时查不到目标，请再试一次。
goal-cleared = 目标已清除。
goal-clear-failed = 没能清除目标，请再试一次。
goal-busy-unchanged = 这个对话里还有任务在进行，所以目标没有改动。可以发送 /stop 停止它，或等任务完成后再试。
goal-set-failed = 没能设定目标，所以还没有开始。请再试一次。
goal-too-long = 这个目标太长了，请控制在 { $max } 个字符以内。
goal-hint-too-long = 这个提示太长了，请控制在 { $max } 个字符以内。
goal-continuing =
    { $max ->
        [0] ↻ 继续朝目标推进（第 { $n } 次跟进）
       *[other] ↻ 继续朝目标推进（第 { $n } 次跟进，共 { $max } 次）
    }
goal-from-chat-saved = 已根据对话设定目标：{ $objective }
goal-from-chat-busy = 这个对话里还有任务在进行，请等它完成后再发送 /goal from-chat。
goal-from-chat-pending-input = 我还在等你回答上一个问题，请先回答，再发送 /goal from-chat。
goal-from-chat-pending-approval = 有一个操作在等你批准，请先批准或拒绝，再发送 /goal from-chat。
goal-from-chat-goal-changed = 我在整理目标时，目标被改动了，所以我没有覆盖它。发送 /goal 可以查看当前目标。
goal-from-chat-no-context = 这个对话里还没有内容可以用来生成目标。先告诉我你在做什么，或者直接用 /goal <条件> 设定目标。
goal-from-chat-unclear = 我没能从对话中找出明确的目标。可以在 /goal from-chat 后面加一句提示，或者直接用 /goal <条件> 设定。
goal-from-chat-synthesis-failed = 这次没能根据对话整理出目标。请再试一次，或者直接用 /goal <条件> 设定。
goal-from-chat-forbidden = 你没有权限在这个对话里设定目标。
goal-from-chat-timeout = 整理目标花的时间比预想的长，它可能稍后仍会保存成功。再试之前，先发送 /goal 看看。
goal-from-chat-failed = 没能根据对话设定目标。请再试一次，或者直接用 /goal <条件> 设定。
goal-from-chat-unsupported = 这个机器人连接的 DeerFlow 版本不支持根据聊天内容生成目标。请直接用 /goal <条件> 设定目标。
goal-from-chat-binding-changed = 我整理目标期间，这个聊天换到了新的对话，所以目标保存在了之前的对话里：{ $objective }。在这里还没有开始执行。
goal-from-chat-not-started-busy = 目标已保存：{ $objective }。这个对话里还有别的任务在进行，所以还没开始做。等它结束后给我发条消息，我就开始推进这个目标。
goal-from-chat-not-started-unavailable = 目标已保存：{ $objective }。但现在连不上智能体，没能开始执行。请过一会儿再给我发条消息，我就接着做。
goal-from-chat-not-started-invalid-agent = 目标已保存：{ $objective }。但这个聊天配置的智能体名称无效，没法开始执行。请联系管理员检查机器人的配置。
goal-from-chat-not-started-failed = 目标已保存：{ $objective }。但开始执行时出了问题。请给我发条消息再试一次。
goal-from-chat-not-started-stopped = 目标已保存：{ $objective }。按你的要求，我还没有开始执行。想开始的时候，给我发条消息就行。

## /lang

lang-current =
    我现在用 { $locale } 回复，{ $source ->
        [chat] 因为这个聊天用 /lang 选择了它。
        [owner] 因为这是你在 DeerFlow 设置里选的语言。
        [sender] 因为这是你的应用所用的语言。
        [channel] 因为这是这个机器人的语言设置。
        [admin] 因为这是管理员设定的默认语言。
       *[default] 因为这是内置的默认语言。
    }
lang-set = 好的，在这个聊天里我会用 { $locale } 回复。
lang-auto = 这个聊天不再单独指定语言，我会用 { $locale } 回复。
lang-not-allowed = 在群聊里，只有这个机器人的管理员可以更改语言。
lang-unsupported = 我暂时还不能用 { $tag } 回复。可用的语言有：{ $supported }
# 这门语言对自己的称呼，和语言选择器里显示的一样。
locale-name = 简体中文
# 句子里列举多项时用的分隔符。
list-separator = 、
# 只发送 /bootstrap 时交给智能体的请求。
bootstrap-default-input = 初始化工作区

## /compact

compact-usage = 压缩这个对话请发送 /compact；发送 /compact keep N 可以保留最近 N 条消息不变（N 为 1 到 { $max }）。
compact-nothing = 还没有可以压缩的对话。
compact-done = 已压缩这个对话较早的部分：{ $removed } 条消息被整理成摘要，最近的 { $kept } 条保持原样。聊天记录本身没有变化。
compact-not-needed = 这个对话的内容还不多，暂时不需要压缩。
compact-disabled = 这台 DeerFlow 服务器用不了对话压缩（功能已关闭，或服务器版本太旧）。
compact-busy = 这个对话里还有任务在进行，请等它完成后再发送 /compact。
compact-timeout = 压缩花的时间比预想的长，它可能稍后会自行完成，过一会儿再看看。
compact-failed = 没能压缩这个对话，内容没有任何改动。请稍后再试。

## 命令菜单（Telegram 菜单）：简短说明

menu-new = 开始新的对话
menu-status = 查看这个聊天所在的对话
menu-goal = 设定、查看或清除目标
menu-compact = 压缩较早的上下文
menu-models = 列出可用的模型
menu-memory = 查看我记住的关于你的信息
menu-lang = 查看或更改回复语言
menu-bootstrap = 初始化你的工作区
menu-help = 看看我能做什么
menu-stop = 停止正在进行的任务

## /help：开头一行，每个命令一条（每行以命令开头），结尾一行

help-header = 我能听懂这些命令：
help-new = /new — 开始一个新的对话
help-goal =
    /goal <条件> — 设定一个目标，我会一直做到达成为止
    /goal — 查看当前目标和进展
    /goal from-chat [提示] — 根据目前的对话内容生成目标
    /goal clear — 清除目标
help-status = /status — 查看这个聊天当前所在的对话
help-stop = /stop （或 /cancel） — 停止正在进行的任务，已经写出的内容会保留
help-compact = /compact [keep N] — 压缩较早的上下文，聊天记录保持不变
help-context = /context compact [keep N] — 与 /compact 相同
help-models = /models — 列出可用的模型
help-memory = /memory — 查看我记住了多少关于你的信息
help-lang = /lang [语言 | auto] — 查看或更改我回复用的语言
help-bootstrap = /bootstrap [内容] — 初始化你的工作区
help-help = /help — 显示这份列表
help-footer = 已安装的技能也可以当命令用：/<技能> <任务>
