# im-bridge — 繁體中文（臺灣）。機器人說的每一句話都在這裡。
# 訊息 id 依前綴分組：run-（AI 代理程式的執行）、err-（錯誤）、cmd-（指令）、
# goal-（/goal 系列）、lang-（/lang）、compact-（/compact）、menu-（指令選單）、
# help-（/help 清單）。
# 各訊息可用的變數請見 src/i18n/msg.rs。

## AI 代理程式的執行

run-busy = 這個對話還在處理前一個要求，請等它完成後再傳一次訊息。
run-no-response = AI 代理程式已經完成，但沒有寫出任何回覆。
run-failed = 處理這個要求時發生問題，請再試一次。
run-interrupted = （這則回答沒有寫完：AI 代理程式完成前發生了問題。）
run-stopped = （已依你的要求停止。）
run-truncated = （回答太長，超出這個聊天室的限制，所以在這裡截斷。）
run-recovered = （抱歉晚了：回答傳送途中，橋接服務重新啟動了一次。）
run-queued = 這個對話裡還有另一個要求正在執行，等它結束我就馬上處理你的訊息。
run-handoff =
    { $where ->
        [group] （還在處理中。訊息傳出後，我只能在幾分鐘內回覆它，所以等聊天室裡有人再傳訊息給我時，我會在回覆中附上{ $shown ->
            [yes] 剩下的內容
           *[no] 回答
        }。）
        [soon] （還在處理中，{ $shown ->
            [yes] 剩下的內容
           *[no] 回答
        }一準備好就會傳到這裡。）
       *[private] （還在處理中。訊息傳出後，我只能在一段時間內回覆它，所以你下次傳訊息給我時，我會在回覆中附上{ $shown ->
            [yes] 剩下的內容
           *[no] 回答
        }。）
    }
run-rest =
    { $more ->
        [no] （關於先前的回答：那已經是全部內容，後面沒有了。）
       *[yes] （接續先前的回答：）
    }
run-held = （這是對先前一則訊息的回答。回答完成時，我已經無法再回覆那則訊息了。）
run-thread-replaced = AI 代理程式那邊已經找不到這個聊天室先前的對話，所以我用你這則訊息開了一個新對話，之前的訊息不會帶過來。
run-too-late = 我離線期間傳到這裡的訊息太晚才送到，所以我沒有處理。如果還需要，請再傳一次。
run-thinking = 處理中…
run-files-created = 已建立 { $count } 個檔案：📎 { $names }
run-file-too-large = { $name } 太大了，超過這裡 { $limit } MB 的上限，所以沒有附上。
run-file-missing = 在 AI 代理程式的檔案中找不到 { $name }，所以沒有附上。
run-file-unavailable = 目前無法從 AI 代理程式取得 { $name }，所以沒有附上。
run-file-refused = 聊天應用程式不接受 { $name }，所以沒有附上。
# 附加在使用者訊息後面、交給 AI 代理程式閱讀：有附件沒能傳過來。
run-attachment-unavailable = [附件「{ $name }」無法讀取，因此沒有附上。]
run-attachment-too-large = [附件「{ $name }」太大，無法轉交，因此沒有附上。]

## 錯誤

err-internal = 抱歉，我這邊出了點問題，請再試一次。
err-gateway-unavailable = 目前連不上 AI 代理程式，請稍後再試。
err-too-busy = 現在訊息太多，我忙不過來，請過一分鐘再試。
err-invalid-agent = 這個聊天室設定的 AI 代理程式名稱無效，所以無法執行。請聯絡管理員檢查機器人的設定。

## 指令

cmd-new-done = 已開始新的對話，之前的訊息不會帶過來。
cmd-new-failed = 無法開始新的對話，請再試一次。
cmd-status-active = 這個聊天室目前的對話是 { $thread }。
cmd-status-none = 這個聊天室還沒有對話，傳訊息給我就能開始。
cmd-stop-none = 這個對話目前沒有執行中的任務，不需要停止。
cmd-stop-elsewhere = 已經停止這個對話中正在進行的任務。
cmd-stop-failed = 無法停止目前的任務，它可能會自己結束。請稍後再傳一次 /stop。
cmd-unknown = 我不認得 { $command } 這個指令。我能處理的指令有：{ $commands }
cmd-unknown-empty = 這是空白的指令。我能處理的指令有：{ $commands }
cmd-models-list =
    可用的模型：
    { $models }
cmd-models-none = 目前還沒有設定任何模型。
cmd-models-failed = 無法取得模型清單，請再試一次。
cmd-memory-facts =
    { $count ->
        [0] 我還沒有記住任何關於你的事。
       *[other] 我記得 { $count } 件關於你的事。
    }
cmd-memory-failed = 目前讀不到我的記憶，請再試一次。
cmd-skill-disabled = 技能 { $command } 已安裝，但目前是停用狀態。請先啟用後再試一次。
cmd-skill-lookup-failed = 目前無法查詢已安裝的技能，請再試一次。

## /goal 系列

goal-status-none = 這個對話目前沒有設定目標。
goal-status-active = 目前的目標：{ $objective }
goal-status-progress =
    目前的目標：{ $objective }
    仍在努力中（已自動接續 { $n }/{ $max } 次）。
goal-status-stopped =
    目前的目標：{ $objective }
    自動接續 { $n }/{ $max } 次後，我先停了下來，因為{ $reason ->
        [missing_evidence] 找不到足夠的證據證明目標已經完成。
        [needs_user_input] 需要你提供資訊才能繼續。
        [run_failed] 上一次嘗試失敗了。
        [external_wait] 正在等待我無法掌控的外部狀況。
        [goal_not_met_yet] 目標還沒有達成。
        [no_verdict] 我無法判斷目標是否已經達成。
        [max_continuations_reached] 自動接續的次數已經用完了。
        [no_progress_detected] 已經沒有進展了。
        [token_capped] 這個任務的用量已達上限。
        [evaluator_failed] 檢查目標時發生錯誤。
        [no_durable_end_of_turn] 上一輪沒有正常結束。
        [thread_changed] 檢查期間對話有了變動。
       *[unknown] 沒有記錄到原因。
    }
    傳個訊息給我就會繼續，或傳送 /goal clear 放棄這個目標。
goal-status-met = 目標已達成：{ $objective }
goal-status-failed = 目前無法查詢目標，請再試一次。
goal-cleared = 目標已清除。
goal-clear-failed = 無法清除目標，請再試一次。
goal-busy-unchanged = 這個對話還有任務在執行，所以目標維持不變。可以傳送 /stop 停止它，或等任務完成後再試一次。
goal-set-failed = 無法設定目標，所以還沒有開始進行。請再試一次。
goal-too-long = 這個目標太長了，請控制在 { $max } 個字元以內。
goal-hint-too-long = 這個提示太長了，請控制在 { $max } 個字元以內。
goal-continuing =
    { $max ->
        [0] ↻ 繼續朝目標努力（第 { $n } 次自動接續）
       *[other] ↻ 繼續朝目標努力（第 { $n } 次自動接續，共 { $max } 次）
    }
goal-from-chat-saved = 已根據我們的對話設定目標：{ $objective }
goal-from-chat-busy = 這個對話還有任務在執行，請等它完成後再傳送 /goal from-chat。
goal-from-chat-pending-input = 我還在等你回答上一個問題，請先回答，再傳送 /goal from-chat。
goal-from-chat-pending-approval = 有一個動作正在等你核准，請先核准或拒絕，再傳送 /goal from-chat。
goal-from-chat-goal-changed = 我在整理目標時，目標已經被修改了，所以我沒有覆蓋它。傳送 /goal 可以查看目前的目標。
goal-from-chat-no-context = 這個對話還沒有內容可以整理成目標。請先告訴我你在做什麼，或直接用 /goal <條件> 設定目標。
goal-from-chat-unclear = 我在對話中找不到明確的目標。可以在 /goal from-chat 後面加一句提示，或直接用 /goal <條件> 設定。
goal-from-chat-synthesis-failed = 這次沒辦法從對話整理出目標。請再試一次，或直接用 /goal <條件> 設定。
goal-from-chat-forbidden = 你沒有在這個對話中設定目標的權限。
goal-from-chat-timeout = 整理目標花的時間比預期久，稍後可能還是會儲存成功。再試一次之前，請先傳送 /goal 確認。
goal-from-chat-failed = 無法根據對話設定目標。請再試一次，或直接用 /goal <條件> 設定。
goal-from-chat-unsupported = 這個機器人連線的 DeerFlow 版本無法從聊天內容整理出目標。請直接用 /goal <條件> 設定目標。
goal-from-chat-binding-changed = 我整理目標的期間，這個聊天室換到了新的對話，所以目標儲存在先前的對話裡：{ $objective }。這裡還沒有開始進行。
goal-from-chat-not-started-busy = 目標已儲存：{ $objective }。這個對話還有別的任務在執行，所以還沒開始進行。等它結束後傳個訊息給我，我就開始朝這個目標努力。
goal-from-chat-not-started-unavailable = 目標已儲存：{ $objective }。不過現在連不上 AI 代理程式，沒辦法開始進行。請過一會兒再傳個訊息給我，我就會接著做。
goal-from-chat-not-started-invalid-agent = 目標已儲存：{ $objective }。不過這個聊天室設定的 AI 代理程式名稱無效，沒辦法開始進行。請聯絡管理員檢查機器人的設定。
goal-from-chat-not-started-failed = 目標已儲存：{ $objective }。不過開始進行時發生了問題。請再傳個訊息給我試一次。
goal-from-chat-not-started-stopped = 目標已儲存：{ $objective }。依你的要求，我還沒有開始進行。想開始的時候，再傳個訊息給我就好。

## /lang

lang-current =
    我現在用 { $locale } 回覆，{ $source ->
        [chat] 因為這個聊天室用 /lang 選了它。
        [owner] 因為這是你在 DeerFlow 設定中選擇的語言。
        [sender] 因為這是你的應用程式使用的語言。
        [channel] 因為這是這個機器人的語言設定。
        [admin] 因為這是管理員設定的預設語言。
       *[default] 因為這是內建的預設語言。
    }
lang-set = 好的，在這個聊天室裡我會用 { $locale } 回覆。
lang-auto = 這個聊天室不再另外指定語言，我會用 { $locale } 回覆。
lang-not-allowed = 在群組裡，只有這個機器人的管理員可以變更語言。
lang-unsupported = 我還沒辦法用 { $tag } 回覆。可以使用的語言有：{ $supported }
# 這個語言對自己的稱呼，和語言選單上顯示的一樣。
locale-name = 繁體中文
# 在句子中列舉多個項目時使用的分隔符號。
list-separator = 、
# 只傳送 /bootstrap 時交給 AI 代理程式的要求。
bootstrap-default-input = 初始化工作區

## /compact

compact-usage = 要精簡這個對話，請傳送 /compact；傳送 /compact keep N 則會保留最近 N 則訊息不變（N 為 1 到 { $max }）。
compact-nothing = 目前還沒有可以精簡的對話。
compact-done = 已精簡這個對話較早的部分：{ $removed } 則訊息整理成摘要，最近的 { $kept } 則維持原樣。聊天紀錄本身沒有改變。
compact-not-needed = 這個對話的內容還不多，暫時不需要精簡。
compact-disabled = 這台 DeerFlow 伺服器無法使用對話精簡（功能已關閉，或伺服器版本太舊）。
compact-busy = 這個對話還有任務在執行，請等它完成後再傳送 /compact。
compact-timeout = 精簡花的時間比預期久，稍後可能會自行完成，請過一會兒再查看。
compact-failed = 無法精簡這個對話，內容沒有任何變動。請稍後再試。

## 指令選單（Telegram 選單）：簡短說明

menu-new = 開始新的對話
menu-status = 查看這個聊天室目前的對話
menu-goal = 設定、查看或清除目標
menu-compact = 精簡較早的脈絡
menu-models = 列出可用的模型
menu-memory = 查看我記得哪些關於你的事
menu-lang = 查看或變更回覆語言
menu-bootstrap = 設定你的工作區
menu-help = 看看我能做什麼
menu-stop = 停止執行中的任務

## /help：開頭一行、每個指令一則（每行都以指令開頭）、結尾一行

help-header = 我看得懂這些指令：
help-new = /new — 開始新的對話
help-goal =
    /goal <條件> — 設定目標，我會持續進行直到達成
    /goal — 查看目前的目標和進度
    /goal from-chat [提示] — 把目前為止的對話整理成目標
    /goal clear — 清除目標
help-status = /status — 查看這個聊天室目前所在的對話
help-stop = /stop （或 /cancel） — 停止執行中的任務，已經寫出的內容會保留
help-compact = /compact [keep N] — 精簡較早的脈絡，聊天紀錄保持不變
help-context = /context compact [keep N] — 與 /compact 相同
help-models = /models — 列出可用的模型
help-memory = /memory — 查看我記得多少關於你的事
help-lang = /lang [語言 | auto] — 查看或變更我回覆使用的語言
help-bootstrap = /bootstrap [內容] — 設定你的工作區
help-help = /help — 顯示這份清單
help-footer = 已安裝的技能也能當作指令使用：/<技能> <任務>
