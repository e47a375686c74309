# im-bridge — 日本語。ボットが話す文はすべてここにあります。
# メッセージ ID は接頭辞ごとにまとめています：run-（エージェントの実行）、err-（エラー）、
# cmd-（コマンド）、goal-（/goal 関連）、lang-（/lang）、compact-（/compact）、
# menu-（コマンドメニュー）、help-（/help の一覧）。
# 各メッセージで使える変数は src/i18n/msg.rs に記載しています。
# 日本語の複数形は other のみのため、数の選択は [0] などの数値の場合分けだけを使います。

## エージェントの実行

run-busy = この会話では、まだ前のリクエストを処理しています。処理が終わってから、もう一度メッセージを送ってください。
run-no-response = エージェントは返信を書かずに処理を終えました。
run-failed = 処理中に問題が発生しました。もう一度お試しください。
run-interrupted = （この回答は途中で途切れています。エージェントの処理が終わる前に問題が発生しました。）
run-stopped = （ご指示により停止しました。）
run-truncated = （回答がこのチャットには長すぎるため、ここで打ち切りました。）
run-recovered = （遅くなって申し訳ありません。回答をお届けする途中でブリッジが再起動しました。）
run-queued = この会話では別のリクエストがまだ実行中です。終わりしだい、こちらに取りかかります。
run-handoff =
    { $where ->
        [group] （まだ処理中です。ここではメッセージの送信から数分間しか返信できないため、{ $shown ->
            [yes] 続き
           *[no] 回答
        }は、このグループで次にどなたかからメッセージが届いたときの返信でお送りします。）
        [soon] （まだ処理中です。{ $shown ->
            [yes] 続き
           *[no] 回答
        }は、準備ができしだいここにお送りします。）
       *[private] （まだ処理中です。ここではメッセージの送信から一定時間しか返信できないため、{ $shown ->
            [yes] 続き
           *[no] 回答
        }は、次にメッセージをいただいたときの返信でお送りします。）
    }
run-rest =
    { $more ->
        [no] （先ほどの回答について：あれで全部です。続きはありません。）
       *[yes] （先ほどの回答の続きです：）
    }
run-held = （これは以前のメッセージへの回答です。回答ができた時点で、そのメッセージにはもう返信できなくなっていました。）
run-thread-replaced = エージェント側でこのチャットの以前の会話が見つからなくなったため、このメッセージで新しい会話を始めました。以前のメッセージは引き継がれません。
run-too-late = 私がオフラインだった間にここへ送られたメッセージは、届くのが遅すぎたため対応していません。まだ必要でしたら、もう一度送ってください。
run-thinking = 処理しています…
run-files-created = ファイルを{ $count }件作成しました：📎 { $names }
run-file-too-large = 「{ $name }」はここで送れるサイズの上限（{ $limit } MB）を超えているため、添付していません。
run-file-missing = エージェントのファイルの中に「{ $name }」が見つからなかったため、添付していません。
run-file-unavailable = 今はエージェントから「{ $name }」を取得できなかったため、添付していません。
run-file-refused = チャットアプリが「{ $name }」を受け付けなかったため、添付していません。
# ユーザーのメッセージに付け加えてエージェントに渡す一文：添付ファイルが届かなかったこと。
run-attachment-unavailable = [添付ファイル「{ $name }」は読み取れなかったため、含まれていません。]
run-attachment-too-large = [添付ファイル「{ $name }」は大きすぎて渡せないため、含まれていません。]

## エラー

err-internal = 申し訳ありません。こちらで問題が発生しました。もう一度お試しください。
err-gateway-unavailable = 現在エージェントに接続できません。しばらくしてから、もう一度お試しください。
err-too-busy = ただいまメッセージが集中していて対応しきれません。1分ほどしてから、もう一度お試しください。
err-invalid-agent = このチャットに設定されているエージェント名が正しくないため、実行できません。ボットの設定を確認するよう、管理者にご依頼ください。

## コマンド

cmd-new-done = 新しい会話を始めました。以前のメッセージは引き継がれません。
cmd-new-failed = 新しい会話を始められませんでした。もう一度お試しください。
cmd-status-active = このチャットの会話は { $thread } です。
cmd-status-none = このチャットにはまだ会話がありません。メッセージを送ると始まります。
cmd-stop-none = この会話で実行中のタスクはないため、停止するものはありません。
cmd-stop-elsewhere = この会話で実行中だったタスクを停止しました。
cmd-stop-failed = 現在のタスクを停止できませんでした。そのまま終わる場合もあります。少ししてから、もう一度 /stop を送ってください。
cmd-unknown = { $command } というコマンドはありません。使えるコマンドは次のとおりです：{ $commands }
cmd-unknown-empty = コマンドが空です。使えるコマンドは次のとおりです：{ $commands }
cmd-models-list =
    利用できるモデル：
    { $models }
cmd-models-none = モデルはまだ設定されていません。
cmd-models-failed = モデルの一覧を取得できませんでした。もう一度お試しください。
cmd-memory-facts =
    { $count ->
        [0] あなたについては、まだ何も覚えていません。
       *[other] あなたについて{ $count }件のことを覚えています。
    }
cmd-memory-failed = 今は記憶を読み込めませんでした。もう一度お試しください。
cmd-skill-disabled = スキル { $command } はインストールされていますが、無効になっています。有効にしてから、もう一度お試しください。
cmd-skill-lookup-failed = 今はインストール済みのスキルを確認できませんでした。もう一度お試しください。

## /goal 関連

goal-status-none = この会話には目標が設定されていません。
goal-status-active = 現在の目標：{ $objective }
goal-status-progress =
    現在の目標：{ $objective }
    引き続き取り組んでいます（自動継続 { $n }/{ $max } 回）。
goal-status-stopped =
    現在の目標：{ $objective }
    自動継続を { $n }/{ $max } 回行ったところで止めました。理由：{ $reason ->
        [missing_evidence] 達成したと判断できる根拠が十分に見つかりませんでした。
        [needs_user_input] 続けるには、あなたからの情報が必要です。
        [run_failed] 前回の試行が失敗しました。
        [external_wait] こちらでは対応できない外部の状況を待っています。
        [goal_not_met_yet] 目標はまだ達成されていません。
        [no_verdict] 目標を達成したかどうか判断できませんでした。
        [max_continuations_reached] 自動継続の回数をすべて使い切りました。
        [no_progress_detected] 進展が見られなくなりました。
        [token_capped] このタスクの利用量が上限に達しました。
        [evaluator_failed] 目標の確認に失敗しました。
        [no_durable_end_of_turn] 前回のターンが正常に終わりませんでした。
        [thread_changed] 確認中に会話が切り替わりました。
       *[unknown] 理由は記録されていません。
    }
    メッセージを送っていただければ続けます。目標を取り下げる場合は /goal clear を送ってください。
goal-status-met = 目標を達成しました：{ $objective }
goal-status-failed = 今は目標を確認できませんでした。もう一度お試しください。
goal-cleared = 目標を解除しました。
goal-clear-failed = 目標を解除できませんでした。もう一度お試しください。
goal-busy-unchanged = この会話ではまだタスクが実行中のため、目標は変更していません。/stop で止めるか、タスクが終わってから、もう一度お試しください。
goal-set-failed = 目標を設定できなかったため、まだ取りかかっていません。もう一度お試しください。
goal-too-long = 目標が長すぎます。{ $max }文字以内にしてください。
goal-hint-too-long = ヒントが長すぎます。{ $max }文字以内にしてください。
goal-continuing =
    { $max ->
        [0] ↻ 引き続き目標に取り組んでいます（自動継続 { $n } 回目）
       *[other] ↻ 引き続き目標に取り組んでいます（自動継続 { $n }/{ $max } 回目）
    }
goal-from-chat-saved = これまでの会話から目標を設定しました：{ $objective }
goal-from-chat-busy = この会話ではまだタスクが実行中です。終わってから、もう一度 /goal from-chat を送ってください。
goal-from-chat-pending-input = 前回の質問へのお返事をお待ちしています。先にお答えいただいてから、もう一度 /goal from-chat を送ってください。
goal-from-chat-pending-approval = 承認待ちの操作があります。先に承認または却下してから、もう一度 /goal from-chat を送ってください。
goal-from-chat-goal-changed = 目標をまとめている間に目標が変更されたため、そのままにしています。現在の目標は /goal で確認できます。
goal-from-chat-no-context = この会話には、目標をまとめられる内容がまだありません。取り組んでいることを先に教えていただくか、/goal <条件> で直接設定してください。
goal-from-chat-unclear = 会話から明確な目標を見つけられませんでした。/goal from-chat に短いヒントを添えて送るか、/goal <条件> で直接設定してください。
goal-from-chat-synthesis-failed = 今回は会話から目標をまとめられませんでした。もう一度お試しいただくか、/goal <条件> で直接設定してください。
goal-from-chat-forbidden = この会話で目標を設定する権限がありません。
goal-from-chat-timeout = 目標をまとめるのに予想より時間がかかっています。このあと保存される可能性もあるため、もう一度試す前に /goal で確認してください。
goal-from-chat-failed = 会話から目標を設定できませんでした。もう一度お試しいただくか、/goal <条件> で直接設定してください。
goal-from-chat-unsupported = このボットが接続している DeerFlow のバージョンでは、チャットから目標をまとめることができません。/goal <条件> で直接設定してください。
goal-from-chat-binding-changed = 目標をまとめている間にこのチャットが新しい会話に切り替わったため、目標は前の会話に保存しました：{ $objective }。こちらではまだ取りかかっていません。
goal-from-chat-not-started-busy = 目標を保存しました：{ $objective }。この会話ではまだ別のタスクが実行中のため、取りかかれていません。それが終わったらメッセージを送ってください。目標に向けて取りかかります。
goal-from-chat-not-started-unavailable = 目標を保存しました：{ $objective }。ただ、現在エージェントに接続できないため、取りかかれませんでした。しばらくしてからメッセージを送ってください。そこから取りかかります。
goal-from-chat-not-started-invalid-agent = 目標を保存しました：{ $objective }。ただ、このチャットに設定されているエージェント名が正しくないため、取りかかれません。ボットの設定を確認するよう、管理者にご依頼ください。
goal-from-chat-not-started-failed = 目標を保存しました：{ $objective }。ただ、取りかかろうとしたところで問題が発生しました。もう一度試すには、メッセージを送ってください。
goal-from-chat-not-started-stopped = 目標を保存しました：{ $objective }。ご指示どおり、まだ取りかかっていません。始めてほしいときに、メッセージを送ってください。

## /lang

lang-current =
    現在は{ $locale }で返信しています。{ $source ->
        [chat] このチャットで /lang により選ばれているためです。
        [owner] あなたの DeerFlow の設定で選ばれている言語のためです。
        [sender] お使いのアプリの言語のためです。
        [channel] このボットの言語設定のためです。
        [admin] 管理者が選んだ既定の言語のためです。
       *[default] 組み込みの既定の言語のためです。
    }
lang-set = 承知しました。このチャットでは{ $locale }で返信します。
lang-auto = このチャット独自の言語設定を解除しました。今後は{ $locale }で返信します。
lang-not-allowed = グループチャットで言語を変更できるのは、このボットの管理者だけです。
lang-unsupported = { $tag } での返信にはまだ対応していません。使える言語：{ $supported }
# この言語の自称。言語の選択肢として表示される名前です。
locale-name = 日本語
# 文の中で項目を並べるときの区切り。
list-separator = 、
# /bootstrap だけが送られたときにエージェントに渡す依頼。
bootstrap-default-input = ワークスペースを初期化

## /compact

compact-usage = この会話を要約して短くするには /compact を、直近の N 件のメッセージをそのまま残すには /compact keep N を送ってください（N は 1～{ $max }）。
compact-nothing = 要約できる会話はまだありません。
compact-done = この会話の古い部分を要約しました。{ $removed }件のメッセージを要約にまとめ、直近の{ $kept }件はそのまま残しています。チャットの履歴自体は変わりません。
compact-not-needed = この会話は、まだ要約するほどの長さではありません。
compact-disabled = この DeerFlow サーバーでは会話の要約を使えません（無効になっているか、サーバーが古いためです）。
compact-busy = この会話ではまだタスクが実行中です。終わってから、もう一度 /compact を送ってください。
compact-timeout = 要約に予想より時間がかかっています。このあと自動で完了する場合もあるため、少ししてから確認してください。
compact-failed = この会話を要約できなかったため、何も変更していません。しばらくしてから、もう一度お試しください。

## コマンドメニュー（Telegram のメニュー）：短い説明

menu-new = 新しい会話を始める
menu-status = このチャットの会話を表示
menu-goal = 目標の設定・表示・解除
menu-compact = 古いコンテキストを要約
menu-models = 利用できるモデルの一覧
menu-memory = あなたについて覚えていることを表示
menu-lang = 返信する言語の表示・変更
menu-bootstrap = ワークスペースのセットアップ
menu-help = できることの一覧
menu-stop = 実行中のタスクを停止

## /help：見出し、コマンドごとの項目（各行はコマンドで始まる）、結び

help-header = 使えるコマンドは次のとおりです：
help-new = /new — 新しい会話を始めます
help-goal =
    /goal <条件> — 目標を設定し、達成するまで取り組み続けます
    /goal — 現在の目標と進み具合を表示します
    /goal from-chat [ヒント] — これまでの会話から目標をまとめます
    /goal clear — 目標を解除します
help-status = /status — このチャットがどの会話にいるかを表示します
help-stop = /stop （または /cancel） — 実行中のタスクを停止します。それまでに書かれた内容は残ります
help-compact = /compact [keep N] — 古いコンテキストを要約します。チャットの履歴は残ります
help-context = /context compact [keep N] — /compact と同じです
help-models = /models — 利用できるモデルを一覧表示します
help-memory = /memory — あなたについてどれくらい覚えているかを表示します
help-lang = /lang [言語 | auto] — 返信する言語を表示・変更します
help-bootstrap = /bootstrap [テキスト] — ワークスペースをセットアップします
help-help = /help — この一覧を表示します
help-footer = インストール済みのスキルもコマンドとして使えます：/<スキル> <タスク>
