"""Few-shot prompts for a base (not instruction-tuned) generator, in the input's own language and
script: a base model continues the pattern it is shown, so Chinese examples get Chinese rewordings,
and Traditional examples Traditional ones (a Simplified prompt turns 帳戶 into 账户).

The examples avoid the words FAQs are about (cards, payments, accounts): a base model copies its
examples' nouns into its output, and a credit card in the prompt became one in a rewording of a
question about a debit card.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..text import non_latin_share


@dataclass(frozen=True)
class PromptSet:
    """An instruction, the two labels of a pair and the example pairs, in one language and script."""

    instruction: str
    source: str  # label before the input ("Message", "原句")
    target: str  # label before the rewording ("Reworded", "改写")
    examples: tuple[tuple[str, str], ...]
    colon: str = ": "

    def prompt(self, text: str) -> str:
        shots = "".join(f"{self.source}{self.colon}{a}\n{self.target}{self.colon}{b}\n\n" for a, b in self.examples)
        return f"{self.instruction}\n\n{shots}{self.source}{self.colon}{text}\n{self.target}{self.colon}"


ENGLISH = PromptSet(
    "Reword what a customer wrote: the same message in different words, from the same person's point of "
    "view, as a question if it was a question.", "Message", "Reworded", (
        ("Where can I see my order history?", "How do I look up my past orders?"),
        ("are you open on weekends", "Do you open on Saturdays and Sundays?"),
        ("How long does delivery take?", "When will my package arrive after I order?"),
        ("I forgot my password", "What should I do if I can't remember my password?"),
        ("parcel still not here after a week", "Why has my package still not arrived after a week?")))
SIMPLIFIED = PromptSet("同一个意思，换一种问法。", "问", "换个问法", (
    ("周末营业吗？", "你们星期六和星期天开门吗？"),
    ("怎么查看我的订单记录？", "以前买过的东西在哪里能查到？"),
    ("快递一般多久能到？", "下单以后几天能收到货？"),
    ("发票可以重新开吗", "开错的发票能不能重开一张？")), "：")
TRADITIONAL = PromptSet("同一個意思，換一種問法。", "問", "換個問法", (
    ("週末營業嗎？", "你們星期六和星期天開門嗎？"),
    ("怎麼查看我的訂單記錄？", "以前買過的東西在哪裡能查到？"),
    ("快遞一般多久能到？", "下單以後幾天能收到貨？"),
    ("發票可以重新開嗎", "開錯的發票能不能重開一張？")), "：")
PROMPTS = {"en": ENGLISH, "zh-Hans": SIMPLIFIED, "zh-Hant": TRADITIONAL}

# common characters written differently in the two scripts (Traditional, Simplified), enough to tell
# which one a question is in
_PAIRS = ("們们 這这 個个 會会 說说 時时 國国 號号 開开 關关 與与 為为 帳账 戶户 銀银 錢钱 轉转 還还 沒没 麼么 "
          "嗎吗 點点 樣样 給给 對对 讓让 從从 買买 賣卖 換换 現现 將将 臺台 後后 裡里 經经 過过 種种 寫写 變变 "
          "題题 問问 請请 辦办 電电 話话 碼码 應应 該该 無无 補补 發发 證证 務务 額额 費费 單单 郵邮 貨货 訂订 "
          "記记 錄录 網网 線线 機机 達达 處处 門门 頁页 遞递 幾几 週周 業业 歡欢 購购 價价 優优 驗验 審审 聯联 "
          "認认 識识 參参 條条 鐘钟 頭头 長长 東东 車车 場场 員员 圖图 書书 學学 見见 進进 運运 邊边 選选 類类 "
          "顯显 風风 熱热 燈灯 狀状 產产 畫画 當当 確确 積积 穩稳 筆笔 簡简 紅红 約约 紙纸 級级 細细 終终 結结 "
          "統统 絕绝 續续 總总 綠绿 編编 練练 繳缴 習习 聽听 職职 舊旧 術术 衛卫 裝装 複复 規规 視视 覺觉 觀观 "
          "計计 設设 許许 試试 詢询 詳详 語语 誤误 調调 論论 讀读 貸贷 資资 賬账 質质 贈赠 輕轻 輸输 農农 遲迟 "
          "鎖锁 鐵铁 閉闭 間间 閱阅 隊队 階阶 際际 隨随 險险 隱隐 雙双 雜杂 離离 難难 靈灵 響响 順顺 預预 領领 "
          "頻频 顧顾 飯饭 餘余 體体 髮发 戶户 掛挂 鬆松 凍冻 銷销 綁绑 償偿 實实 際际 區区 級级 態态 擇择 準准").split()
_TRADITIONAL = frozenset(p[0] for p in _PAIRS if p[0] != p[1])
_SIMPLIFIED = frozenset(p[1] for p in _PAIRS if p[0] != p[1])


def chinese_script(text: str) -> str:
    """'zh-Hant' where the text has more Traditional-only than Simplified-only characters, else 'zh-Hans'."""
    trad = sum(ch in _TRADITIONAL for ch in text)
    simp = sum(ch in _SIMPLIFIED for ch in text)
    return "zh-Hant" if trad > simp else "zh-Hans"


def variant(text: str) -> str:
    """The prompt set for ``text``: 'en' for a mostly Latin text, else its Chinese script."""
    return "en" if non_latin_share([text]) <= 0.5 else chinese_script(text)


# What a rewording in Chinese is written with: CJK ideographs, CJK and fullwidth punctuation, digits,
# ASCII punctuation and spaces, and short Latin words ("App", "ATM", "VIP"). A base model sampled over
# its whole vocabulary (Gemma: 262,144 tokens, most of them other scripts and English pieces) spends
# most of each step scoring tokens no Chinese rewording uses; CausalLMGenerator scores these only.
_CHINESE_PIECE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef\u2000-\u206f"
                            r"0-9\s!-/:-@\[-`{-~]*|\s?[A-Za-z]{1,3}")


def script_pieces(key: str) -> re.Pattern | None:
    """The pattern a token's text must match entirely to be written in the prompt set ``key``'s output,
    or None where any token may be (English)."""
    return _CHINESE_PIECE if key.startswith("zh") else None
