"""When may a cached FAQ answer be served for a question? Cosine threshold + lexical guard.

Cosine similarity alone cannot separate paraphrases from near misses with all-MiniLM-L6-v2
(measured on batch 1 of inference/faq/data/labelled_pairs.jsonl): paraphrases score 0.37-0.98,
negations ("turn on" vs "turn off") 0.64-0.97, amounts ("$10" vs "$100") 0.84-1.00. So a hit
needs BOTH a score at or above a calibrated threshold AND a lexical guard that vetoes the structural
differences the embedding is blind to. The guard is deliberately conservative: a wrong cached
answer is worse than a slower model answer, so a word it does not know must be on both sides.

The guard compares the two texts after normalisation (lowercase, contractions expanded,
multi-word terms such as "log in" or "gift card" joined, synonyms grouped, light stemming,
typo tolerance) and vetoes, in this order, with a reason that names the words involved:

1. numbers: the numbers (amounts, counts, sizes, durations, ordinals; "twice" = 2) must be the
   same, in the same order ("$10" vs "$100", "9.99 instead of 4.99" vs the reverse);
2. negation: a negation ("not", "never", "no", "without", "unable", "un-" words) on one side
   only, or negations of different words ("not detected" vs "no signal");
3. polarity: words at opposite poles of an axis (on/off, enable/disable, start/stop/cancel,
   open/close, add/remove, increase/decrease, upgrade/downgrade, lock/unlock, log in/out, ...);
4. direction: both sides say "from X to Y" / "instead of" and name the same things in another
   order ("upgrade from Family to Business" vs the reverse);
5. subjects: a specific object or qualifier present on one side only ("password" vs "router",
   "order" vs "subscription", "premium" vs "basic", "s23" vs "s24"); words the lexicon does not
   know are presumed to be such objects (product names, places), typos aside;
6. wording: each side has an action or a general content word the other lacks ("track" vs
   "cancel", "pause" vs "cancel", "new" vs "used"); one side may add some ("where is" vs
   "track"), but not swap them;
7. the same actions in another order ("recover a deleted order" vs "delete a recovered order").

Function words and politeness ("how", "my", "please") are ignored. Everything here is pure and
cheap (~0.1 ms per pair cold, ~5 us once the per-text analyses are cached).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import Enum
from functools import lru_cache

# Chosen by `python -m bench.faq_calibration` on batch 1 of faq/data/labelled_pairs.jsonl (438
# labelled pairs, real all-MiniLM-L6-v2): best recall with zero false hits on every negative
# kind with the guard on picks 0.51; its safety floor (`SAFETY_FLOOR`: below 0.70 a hit would
# rest on the guard alone, which blind batches showed misses ~1 unseen near miss in 11) makes
# it 0.70. At 0.70: precision 1.000, recall 0.567 (106/187 paraphrase pairs), 0 false hits; cosine
# alone would have 137 false hits. Tables: bench/README.md, "FAQ cache calibration".
CALIBRATED_THRESHOLD = 0.70

# A refused question whose best entry scores at least this is shown to the admin as a suggested
# phrasing of it (no answer depends on it: an admin decides). Paraphrases in the labelled pairs
# score from 0.37; below 0.50 the suggestions would be mostly unrelated questions.
SUGGEST_FLOOR = 0.50


@dataclass(frozen=True, slots=True)
class Candidate:
    """One FAQ entry's best-scoring phrasing for a query (cosine of unit vectors)."""

    entry_id: int
    phrasing: str
    score: float


@dataclass(frozen=True, slots=True)
class MatchDecision:
    entry_id: int
    phrasing: str
    score: float
    accepted: bool
    reason: str


@dataclass(frozen=True, slots=True)
class GuardResult:
    passed: bool
    reason: str


class Kind(Enum):
    OBJECT = "object"  # a specific thing or state: must be on both sides
    QUALIFIER = "qualifier"  # plan tier, colour, size, unit, model code: must be on both sides
    ACTION = "action"  # what the user wants done: a different action on each side vetoes
    SOFT = "soft"  # too general to name a topic ("account", "new"): matters only as a swap
    STOP = "stop"  # function words and politeness: ignored


# --- lexicon ------------------------------------------------------------------------------
# concept -> words. A word belongs to one concept; stemming (plural, -ed, -ing) is automatic.

_OBJECTS: dict[str, tuple[str, ...]] = {
    "password": ("password", "passcode", "pwd", "passphrase"),
    "pin": ("pin",),
    "username": ("username", "userid"),
    "display_name": ("display_name", "nickname"),
    "avatar": ("avatar", "profile_picture", "photo", "picture"),
    "profile": ("profile",),
    "email": ("email", "emails", "mail", "inbox"),
    "phone_number": ("phone_number",),
    "address": ("address",),
    "shipping_address": ("shipping_address",),
    "billing_address": ("billing_address",),
    "order": ("order", "package", "parcel", "shipment", "purchase"),
    "order_number": ("order_number",),
    "tracking_number": ("tracking_number",),
    "history": ("history", "past_orders"),
    "cart": ("cart", "basket", "bag"),
    "checkout": ("checkout",),
    "refund": ("refund", "refundable", "reimburse", "reimbursement", "money_back"),
    "return": ("return", "returnable"),
    "exchange": ("exchange", "swap"),
    "store_credit": ("store_credit",),
    "receipt": ("receipt",),
    "invoice": ("invoice", "bill"),
    "payment_method": ("payment_method",),
    "card": ("card", "creditcard", "debitcard", "card_details"),
    "gift_card": ("gift_card", "giftcard", "voucher"),
    "gift": ("gift",),
    "gift_wrap": ("gift_wrap",),
    "sim": ("sim", "sim_card", "esim"),
    "subscription": ("subscription", "membership", "plan", "subscribtion"),
    "autorenew": ("autorenew",),
    "renew": ("renew", "renewal"),
    "trial": ("trial",),
    "newsletter": ("newsletter", "marketing", "promotion", "promotional", "spam"),
    "notification": ("notification", "alert"),
    "promo_code": ("promo_code", "coupon"),
    "discount": ("discount", "sale", "deal"),
    "price": ("price", "cost", "fee", "how_much", "pricing", "expensive", "cheap"),
    "price_match": ("price_match",),
    "tax": ("tax", "vat"),
    "warranty": ("warranty", "guarantee"),
    "policy": ("policy", "terms"),
    "privacy": ("privacy",),
    "shipping": ("shipping", "ship", "delivery", "deliver", "dispatch", "postage", "courier"),
    "pickup": ("pickup", "collect", "collection"),
    "store": ("store", "shop", "in_store", "branch"),
    "hours": ("hours", "opening_hours"),
    "support": (
        "support",
        "customer_service",
        "agent",
        "human",
        "person",
        "representative",
        "operator",
        "helpdesk",
        "team",
    ),
    "seller": ("seller", "vendor", "merchant"),
    "ticket": ("ticket", "complaint"),
    "router": ("router",),
    "modem": ("modem",),
    "wifi": ("wifi", "wlan", "hotspot"),
    "internet": ("internet", "broadband"),
    "bluetooth": ("bluetooth",),
    "phone": ("phone", "smartphone", "mobile", "cellphone", "handset"),
    "tablet": ("tablet", "ipad"),
    "computer": ("computer", "laptop", "pc", "desktop", "notebook", "macbook"),
    "tv": ("tv", "television", "smart_tv"),
    "speaker": ("speaker", "soundbar"),
    "printer": ("printer",),
    "watch": ("watch", "smartwatch"),
    "headphones": ("headphones", "headphone", "earbuds", "earbud", "headset", "earphones"),
    "battery": ("battery",),
    "charger": ("charger", "cable", "adapter"),
    "screen": ("screen", "display"),
    "camera": ("camera",),
    "controller": ("controller", "remote"),
    "firmware": ("firmware", "software"),
    "app": ("app", "application"),
    "website": ("website", "site", "webpage", "browser"),
    "voicemail": ("voicemail",),
    "call_forwarding": ("call_forwarding",),
    "call": ("call", "calls", "calling"),
    "text_message": ("sms", "text_message"),
    "data": ("data",),
    "language": ("language",),
    "currency": ("currency",),
    "balance": ("balance",),
    "credit_limit": ("credit_limit",),
    "limit": ("limit",),
    "twofactor": ("twofactor",),
    "code": ("code", "otp"),
    "confirmation": ("confirmation",),
    "size": ("size", "fit"),
    "color": ("color", "colour"),
    "stock": ("stock", "in_stock", "inventory"),
    "location": ("location", "country", "countries", "abroad", "overseas"),
    "weekend": ("weekend", "saturday", "sunday"),
    "review": ("review", "rating"),
    "dark_mode": ("dark_mode",),
    "cookie": ("cookie",),
    "addon": ("addon",),
    "contract": ("contract",),
    "reset_email": ("reset_email",),
    # states of an order, payment or device
    "damaged": ("damaged", "broken", "cracked", "defective", "faulty", "shattered", "smashed"),
    "stolen": ("stolen", "theft"),
    "missing": ("missing", "lost", "disappeared"),
    "wrong": ("wrong", "incorrect", "mistake"),
    "late": ("late", "delayed", "delay", "overdue"),
    "slow": ("slow", "laggy", "lag"),
    "expired": ("expired", "expire", "expiry", "expiration"),
    "crash": ("crash", "freeze", "frozen", "hang"),
    "hacked": ("hacked", "hack", "compromised", "breach"),
    "drain": ("drain", "runs_out", "dies"),
    "duplicate": ("duplicate",),
}

_QUALIFIERS: dict[str, tuple[str, ...]] = {
    "basic": ("basic",),
    "premium": ("premium",),
    "pro": ("pro",),
    "plus": ("plus",),
    "lite": ("lite", "light"),
    "standard": ("standard", "regular"),
    "express": ("express", "overnight", "expedited"),
    "family": ("family",),
    "business": ("business", "enterprise", "corporate"),
    "student": ("student",),
    "teacher": ("teacher",),
    "senior": ("senior",),
    "military": ("military",),
    "kids": ("kid", "kids", "child", "children"),
    "individual": ("individual", "personal"),
    "international": ("international", "internationally", "worldwide"),
    "domestic": ("domestic",),
    "digital": ("digital", "ebook"),
    "physical": ("physical",),
    "annual": ("annual", "annually", "yearly"),
    "monthly": ("monthly",),
    "weekly": ("weekly",),
    "free": ("free",),
    "priority": ("priority",),
    "refurbished": ("refurbished",),
    "used": ("secondhand",),
    "black": ("black",),
    "white": ("white",),
    "red": ("red",),
    "blue": ("blue",),
    "green": ("green",),
    "silver": ("silver",),
    "gold": ("gold",),
    "pink": ("pink",),
    "grey": ("grey", "gray"),
    "small": ("small",),
    "medium": ("medium",),
    "large": ("large", "big"),
    "usd": ("usd", "dollar", "dollars", "buck", "bucks"),
    "eur": ("eur", "euro", "euros"),
    "gbp": ("gbp", "pound", "pounds", "quid"),
    "percent": ("percent", "percentage"),
    "gb": ("gb", "gigabyte", "gig", "gigs"),
    "mb": ("mb", "megabyte"),
    "tb": ("tb", "terabyte"),
    "inch": ("inch", "inches"),
    "cm": ("cm", "centimeter", "centimetre"),
}

_ACTIONS: dict[str, tuple[str, ...]] = {
    "pay": (
        "pay",
        "paid",
        "payment",
        "charge",
        "billed",
        "billing",
        "debit",
        "debited",
        "transaction",
    ),
    "reset": ("reset", "forgot", "forget", "forgotten", "recover", "recovery", "restore"),
    "change": (
        "change",
        "update",
        "modify",
        "edit",
        "switch",
        "alter",
        "amend",
        "reschedule",
    ),
    "track": ("track", "tracking", "trace"),
    "buy": ("buy", "sell", "preorder"),
    # looking something up is an action of its own: "view my bill" is not "pay my bill"
    "view": ("view", "see", "look", "check", "find"),
    "redeem": ("redeem", "apply", "enter"),
    "download": ("download", "export", "copy", "print", "resend"),
    "verify": ("verify", "confirm", "validate", "verification", "authenticate"),
    "contact": ("contact", "reach", "speak", "talk", "chat"),
    "report": ("report",),
    "transfer": ("transfer",),
    "merge": ("merge", "combine"),
    "share": ("share",),
    "create": ("create", "signup", "register", "registration"),
    "setup": ("setup", "install", "configure", "configuration", "set_up"),
    "reboot": ("reboot", "restart", "power_cycle"),
    "receive": ("receive", "arrive", "arrived"),
    "cancel": ("cancel", "cancellation", "terminate", "quit", "discontinue", "end", "stop"),
    "start": ("start", "begin", "launch"),
    "enable": ("enable", "activate", "on_power"),
    "disable": ("disable", "deactivate", "off_power", "off"),
    "open": ("open",),
    "close": ("close",),
    "subscribe": ("subscribe", "resubscribe"),
    "unsubscribe": ("unsubscribe", "opt_out", "optout"),
    "pause": ("pause", "suspend", "on_hold"),
    "resume": ("resume", "unpause", "reactivate"),
    "add": ("add", "insert", "attach", "invite"),
    "remove": ("remove", "delete", "erase", "uninstall", "get_rid"),
    "include": ("include", "included", "cover", "covered", "inclusive"),
    "exclude": ("exclude", "excluded"),
    "increase": ("increase", "raise", "higher", "boost", "extend"),
    "decrease": ("decrease", "lower", "reduce", "shorten"),
    "upgrade": ("upgrade",),
    "downgrade": ("downgrade",),
    "lock": ("lock", "locked", "block", "blocked", "locked_out"),
    "unlock": ("unlock", "unblock", "unfreeze"),
    "login": ("login",),
    "logout": ("logout",),
    "connect": ("connect", "pair", "sync", "link", "hook_up"),
    "disconnect": ("disconnect", "unpair", "unlink", "unsync", "drop_out"),
    "accept": ("accept", "accepted", "approve", "approved", "go_through"),
    "decline": ("decline", "declined", "reject", "rejected", "refuse", "refused", "deny"),
    "show": ("show", "visible", "unhide", "public", "publicly"),
    "hide": ("hide", "hidden", "invisible", "private"),
    "mute": ("mute", "silence"),
    "unmute": ("unmute",),
    "online": ("online",),
    "offline": ("offline",),
    "before": ("before", "prior"),
    "after": ("after",),
    "keep": ("keep", "retain"),
    "toward": ("to", "into", "toward", "towards"),
    "away": ("away",),
}

# Opposite poles: a word of one pole facing a word of the other vetoes ("cancel" vs "start").
_AXES: tuple[tuple[frozenset[str], frozenset[str]], ...] = tuple(
    (frozenset(on), frozenset(off))
    for on, off in (
        (("start", "enable", "open", "subscribe"), ("cancel", "disable", "close", "unsubscribe")),
        (("resume",), ("pause",)),
        (("add", "include", "setup"), ("remove", "exclude")),
        (("increase", "upgrade"), ("decrease", "downgrade")),
        (("lock",), ("unlock",)),
        (("login",), ("logout",)),
        (("connect",), ("disconnect",)),
        (("accept",), ("decline",)),
        (("show",), ("hide",)),
        (("mute",), ("unmute",)),
        (("online",), ("offline",)),
        (("before",), ("after",)),
        (("toward",), ("away",)),
    )
)

# Content words too general to name an FAQ topic: tolerated on one side only ("my account"),
# but a soft word facing a different unmatched word is a substitution ("new" vs "used").
# Grouped by meaning so that "info" = "information", "fast" = "quickly".
_SOFT: dict[str, tuple[str, ...]] = {
    "account": ("account", "acct"),
    "device": ("device", "gadget", "unit"),
    "info": ("information", "info", "details", "detail"),
    "settings": ("settings", "setting", "option", "preferences", "preference"),
    "feature": ("feature", "service", "function", "functionality"),
    "status": ("status", "progress"),
    "problem": ("problem", "issue", "trouble", "error", "question"),
    "duration": ("duration", "how_long", "how_many_days", "long", "time"),
    "date": (
        "date",
        "day",
        "week",
        "month",
        "year",
        "hour",
        "minute",
        "yesterday",
        "today",
        "tomorrow",
    ),
    "version": ("version", "latest", "newest"),
    "new": ("new",),
    "old": ("old", "older"),
    "original": ("original", "existing", "current"),
    "other": ("other", "another", "different"),
    "same": ("same",),
    "method": ("method", "approach"),
    "link": ("url",),
    "connection": ("connection", "network", "signal"),
    "page": ("page", "section", "menu", "button", "tab"),
    "company": ("company", "organisation", "organization"),
    "number": ("number", "amount", "total", "value", "sum"),
    "money": ("money", "fund", "funds"),
    "credit": ("credit",),
    "all": ("all", "everywhere", "every", "everything", "entire", "whole"),
    "multiple": ("multiple", "several", "more_than_one"),
    "more": ("more", "extra", "additional"),
    "user": ("user", "someone", "somebody", "people", "member", "customer"),
    "first": ("first",),
    "last": ("last", "previous", "recent", "recently"),
    "next": ("next", "upcoming", "future"),
    "fast": (
        "fast",
        "faster",
        "fastest",
        "quick",
        "quickly",
        "soon",
        "immediately",
        "asap",
        "urgent",
        "urgently",
        "speed",
        "speedy",
    ),
    "slow_speed": ("slowly",),
    "real": ("real", "actual", "live"),
    "permanent": ("permanent", "permanently", "forever", "for_good"),
    "automatic": ("automatic", "automatically", "auto"),
    "manual": ("manual", "manually"),
    "secure": ("secure", "safe", "safely", "security", "safety"),
    "work": ("work", "working", "functioning"),
    "available": ("available", "availability", "eligible", "allowed", "allow", "permit"),
    "good": ("good",),
    "bad": ("bad", "poor"),
    "happen": ("happen", "occur"),
    "appear": ("appear",),
    "give": ("give", "gave", "given", "provide"),
    "send": ("send", "sent", "sending"),
    "use": ("use", "usage", "used", "using"),
    "request": ("request",),
    "offer": ("offer",),
    "recognize": ("recognize", "recognise"),
    "manage": ("manage", "handle", "control"),
    "run": ("run", "running"),
    "access": ("access",),
    "name": ("name", "title"),
    "process": ("processed", "processing"),
    # leftover verbs of phrases ("set a limit", "turn the dial"): content, never ignored
    "set": ("set",),
    "turn": ("turn",),
    "power": ("power",),
}
# Function words, pronouns, auxiliaries, question words, politeness: ignored entirely.
_STOPWORDS: tuple[str, ...] = (
    "i",
    "you",
    "your",
    "yours",
    "my",
    "mine",
    "we",
    "us",
    "our",
    "ours",
    "it",
    "its",
    "they",
    "them",
    "their",
    "theirs",
    "he",
    "she",
    "him",
    "her",
    "his",
    "me",
    "myself",
    "this",
    "that",
    "these",
    "those",
    "a",
    "an",
    "the",
    "and",
    "or",
    "but",
    "so",
    "if",
    "then",
    "than",
    "because",
    "as",
    "of",
    "to",
    "for",
    "in",
    "on",
    "at",
    "by",
    "with",
    "into",
    "onto",
    "about",
    "via",
    "through",
    "over",
    "under",
    "up",
    "down",
    "out",
    "back",
    "away",
    "do",
    "does",
    "did",
    "done",
    "doing",
    "be",
    "is",
    "am",
    "are",
    "was",
    "were",
    "been",
    "being",
    "have",
    "has",
    "had",
    "having",
    "can",
    "could",
    "may",
    "might",
    "must",
    "shall",
    "should",
    "will",
    "would",
    "where",
    "when",
    "why",
    "how",
    "what",
    "which",
    "who",
    "whom",
    "whose",
    "whether",
    "whenever",
    "wherever",
    "here",
    "there",
    "somewhere",
    "anywhere",
    "get",
    "got",
    "gotten",
    "getting",
    "go",
    "going",
    "gone",
    "went",
    "come",
    "came",
    "take",
    "took",
    "taken",
    "make",
    "made",
    "making",
    "want",
    "need",
    "like",
    "wish",
    "know",
    "tell",
    "explain",
    "help",
    "assist",
    "assistance",
    "ask",
    "wonder",
    "think",
    "believe",
    "guess",
    "seem",
    "mean",
    "let",
    "put",
    "say",
    "said",
    "says",
    "just",
    "only",
    "also",
    "too",
    "very",
    "really",
    "quite",
    "pretty",
    "much",
    "many",
    "any",
    "some",
    "each",
    "every",
    "still",
    "again",
    "anymore",
    "already",
    "yet",
    "ever",
    "now",
    "right",
    "ago",
    "even",
    "though",
    "although",
    "while",
    "during",
    "since",
    "until",
    "till",
    "both",
    "either",
    "within",
    "around",
    "across",
    "between",
    "per",
    "upon",
    "else",
    "well",
    "sure",
    "maybe",
    "perhaps",
    "probably",
    "possibly",
    "certain",
    "certainly",
    "usually",
    "typically",
    "possible",
    "able",
    "way",
    "ok",
    "okay",
    "fine",
    "please",
    "pls",
    "plz",
    "kindly",
    "thanks",
    "thank",
    "thx",
    "hi",
    "hello",
    "hey",
    "dear",
    "sir",
    "madam",
    "regards",
    "cheers",
    "sorry",
    "excuse",
    "instead",
    "rather",
    "regarding",
    "concerning",
    "re",
    "fyi",
    "btw",
    "im",
    "ive",
    "id",
    "youre",
    "theres",
    "whats",
    "hows",
    "doesn",
    "isn",
    "lately",
    "asap",
    "whatever",
    "anyone",
    "ready",
    "great",
    "once",
    "item",
    "product",
    "something",
    "stuff",
    "thing",
    "goods",
    "place",
    "placed",
    "process",
    "one",
    "try",
    "attempt",
    "statement",
    "move",
    "nothing",
    "anything",
    "own",
)

_NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "without",
        "unable",
        "nothing",
        "none",
        "nobody",
        "neither",
        "nor",
        "cannot",
        "lack",
        "lacking",
        "fail",
        "failed",
        "fails",
        "failing",
    }
)
# Words that only matter against their opposite: "after" alone is no action of its own.
_POLARITY_ONLY = frozenset(
    {"before", "after", "online", "offline", "keep", "show", "hide", "toward", "away"}
)
# "from X to Y" / "X instead of Y": the order of the things named matters.
_DIRECTION_WORDS = frozenset({"from", "instead", "rather", "versus", "vs"})

_NUMBER_WORDS: dict[str, str] = {
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "eleven": "11",
    "twelve": "12",
    "fifteen": "15",
    "twenty": "20",
    "thirty": "30",
    "forty": "40",
    "fifty": "50",
    "sixty": "60",
    "ninety": "90",
    "hundred": "100",
    "thousand": "1000",
    "twice": "2",
    "double": "2",
    "doubled": "2",
    "thrice": "3",
    "triple": "3",
    "tripled": "3",
    "half": "0.5",
    "second": "2",
    "third": "3",
    "fourth": "4",
    "fifth": "5",
}

# Multi-word terms and spelling variants, applied in order to the lowercased text.
_PHRASES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"[\u2018\u2019`\u00b4]", "'"),
        (r"\bcan'?t\b|\bcannot\b", "can not"),
        (r"\bwon'?t\b", "will not"),
        (r"\bain'?t\b", "is not"),
        (
            r"\b(do|does|did|is|are|was|were|has|have|had|could|should|would|need|must)n'?t\b",
            r"\1 not",
        ),
        (r"n't\b", " not"),
        (r"'(s|d|ll|re|ve|m)\b", ""),
        (
            r"\b(?:two|2|multi|multiple)[- ]?(?:factor|step)(?: authentication| verification)?"
            r"|\b2fa\b|\bmfa\b|\btfa\b",
            " twofactor ",
        ),
        (
            r"\b(?:log|logged|logging|sign|signed|signing)[- ]?(?:in|into|on)\b|\blogin\b"
            r"|\bsignin\b",
            " login ",
        ),
        (
            r"\b(?:log|logged|logging|sign|signed|signing)[- ]?(?:out|off)\b|\blogout\b"
            r"|\bsignout\b",
            " logout ",
        ),
        (r"\b(?:sign|signed|signing)[- ]?up\b|\bsignup\b", " signup "),
        (
            r"\b(?:turn|turns|turned|turning|switch|switches|switched|switching|power|powers|"
            r"powered|powering|toggle|toggled)\s+(?:(?:it|them|this|that|my|the|back|\w+)\s+)?"
            r"on\b",
            " on_power ",
        ),
        (
            r"\b(?:turn|turns|turned|turning|switch|switches|switched|switching|power|powers|"
            r"powered|powering|toggle|toggled|shut|shuts)\s+(?:(?:it|them|this|that|my|the|back|"
            r"\w+)\s+)?(?:off|down)\b",
            " off_power ",
        ),
        (r"\b(\d+(?:[.,]\d+)?)\s*%\s*off\b", r"\1 percent discount"),
        (r"%", " percent "),
        (r"\b(?:put|place|placed|putting)?\s*(?:it\s+)?on hold\b", " on_hold "),
        (r"\b(?:set|setting|sets)[- ]?up\b|\bsetup\b", " set_up "),
        (r"\bhook(?:ed|ing)? up\b", " hook_up "),
        (r"\bpick(?:ed|ing|s)?[- ]?up\b", " pickup "),
        (r"\b(?:marketing|promotional|promo) (?:e-?mails?|messages?|texts?)\b", " marketing "),
        (r"\bopt(?:ed|ing)?[- ]?out\b", " opt_out "),
        (r"\bget(?:ting)? rid of\b", " get_rid "),
        (r"\blocked out\b", " locked_out "),
        (r"\b(?:run|runs|running|ran) out\b|\bdies (?:quickly|fast)\b", " runs_out "),
        (r"\bpower[- ]?cycle\b", " power_cycle "),
        (r"\b(?:go|goes|went|gone|going) through\b", " go_through "),
        (r"\bmoney back\b|\bmy money\b", " money_back "),
        (r"\b(?:send|sends|sent|sending|ship|shipping|bring|mail) (?:\w+ ){0,2}back\b", " return "),
        (r"\bauto(?:matic(?:ally)?)?[- ]?renew(?:al|als|ing|s|ed)?\b", " autorenew "),
        (r"\be-?mail(?:ed|ing)?\s+address(?:es)?\b|\be-mail\b|\bemailed\b", " email "),
        (
            r"\b(?:shipping|delivery|mailing|postal|home|street) address(?:es)?\b",
            " shipping_address ",
        ),
        (r"\bbilling address(?:es)?\b", " billing_address "),
        (r"\b(?:phone|mobile|cell|telephone|contact) (?:number|no)s?\b", " phone_number "),
        (r"\btracking (?:number|no|id|code)s?\b", " tracking_number "),
        (r"\border (?:number|no|id)s?\b", " order_number "),
        (r"\bpast orders?\b|\bprevious orders?\b|\border history\b", " past_orders "),
        (r"\buser ?names?\b|\buser id\b|\blogin name\b", " username "),
        (r"\bdisplay names?\b|\bscreen names?\b", " display_name "),
        (r"\bprofile (?:picture|photo|pic|image)s?\b", " profile_picture "),
        (r"\bgift[- ]?cards?\b|\bgift certificates?\b", " gift_card "),
        (r"\bgift[- ]?wrap(?:ping|ped)?\b", " gift_wrap "),
        (r"\bsim[- ]?cards?\b", " sim_card "),
        (r"\b(?:credit|debit|bank) cards?\b|\bcard on file\b", " card "),
        (r"\bcard (?:details|info|information|number)\b", " card_details "),
        (
            r"\bpayment (?:methods?|options?|info|information|details)\b"
            r"|\bways? (?:to|i can|can i) pay\b",
            " payment_method ",
        ),
        (r"\bstore credit\b", " store_credit "),
        (r"\bcredit limit\b", " credit_limit "),
        (r"\b(?:promo(?:tional)?|discount|coupon|voucher|referral) codes?\b", " promo_code "),
        (r"\bprice[- ]?match(?:ing|es)?\b|\bmatch (?:a |the )?(?:lower )?price\b", " price_match "),
        (
            r"\bcustomer (?:service|support|care)\b|\bhelp ?desk\b|\bsupport team\b"
            r"|\breal person\b|\blive agent\b",
            " customer_service ",
        ),
        (r"\bcall[- ]?forward(?:ing)?\b", " call_forwarding "),
        (r"\btext messages?\b", " text_message "),
        (r"\bdark (?:mode|theme)\b", " dark_mode "),
        (r"\bsmart ?tv\b", " smart_tv "),
        (r"\bin[- ]store\b", " in_store "),
        (r"\bin stock\b", " in_stock "),
        (r"\bopening hours\b|\bbusiness hours\b|\bstore hours\b", " opening_hours "),
        (r"\bhow long\b", " how_long "),
        (r"\bhow many (?:days|weeks|hours|months|business days)\b", " how_many_days "),
        (r"\bmore than one\b", " more_than_one "),
        (r"\bfor good\b", " for_good "),
        (
            r"\b(?:get|install|download) the (?:latest|newest) version\b|\blatest version\b",
            " update ",
        ),
        (r"\bhow much (?=(?:is|are|does|do|did|will|would|for|to|money|extra)\b)", " how_much "),
        (r"\bdrop(?:s|ped|ping)? (?:out|off)\b", " drop_out "),
        (r"\badd[- ]ons?\b", " addon "),
        (r"\bwi[- ]?fi\b", " wifi "),
        (r"\bpassword reset (?:e-?mail|link|message)s?\b", " password reset_email "),
        (r"\breset (?:e-?mail|link|message)s?\b", " reset_email "),
        (r"\b(?:second|2nd)[- ]?hand\b|\bpre[- ]?owned\b", " secondhand "),
        (r"\bnon[- ]", " not "),
        (r"-", " "),
    )
)

_NUMBER = re.compile(r"^\d+(?:[.,]\d+)*$")
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
_NUMBER_UNIT = re.compile(r"^(\d+(?:[.,]\d+)?)([a-z]+)$")
_TOKEN = re.compile(r"[a-z0-9_$€£.,]+")
_CURRENCY = {"$": "usd", "€": "eur", "£": "gbp"}


def _build_lexicon() -> tuple[dict[str, tuple[Kind, str]], frozenset[str]]:
    for table in (_OBJECTS, _QUALIFIERS, _ACTIONS, _SOFT):
        for concept, words in table.items():
            if isinstance(words, str):  # ("word") is a string, not a tuple: letters would count
                raise TypeError(f"lexicon: {concept!r} needs a tuple of words")
    lexicon: dict[str, tuple[Kind, str]] = {}

    def put(words: Iterable[str], kind: Kind, concept: str) -> None:
        for word in words:
            if word in lexicon and lexicon[word] != (kind, concept):
                raise ValueError(f"lexicon: {word!r} is in two concepts")
            lexicon[word] = (kind, concept)

    for concept, words in _OBJECTS.items():
        put(words, Kind.OBJECT, concept)
    for concept, words in _QUALIFIERS.items():
        put(words, Kind.QUALIFIER, concept)
    for concept, words in _ACTIONS.items():
        put(words, Kind.ACTION, concept)
    for concept, words in _SOFT.items():
        # a word with a specific meaning elsewhere keeps it
        put((word for word in words if word not in lexicon), Kind.SOFT, concept)
    stopwords = frozenset(_STOPWORDS) - lexicon.keys()
    return lexicon, stopwords


_LEXICON, _STOPWORD_SET = _build_lexicon()
_POLE: dict[str, tuple[int, int]] = {
    concept: (axis, pole)
    for axis, poles in enumerate(_AXES)
    for pole, concepts in enumerate(poles)
    for concept in concepts
}
_POLARITY_ONLY_KEYS = frozenset(
    concept if concept not in _POLE else f"axis{_POLE[concept][0]}:{_POLE[concept][1]}"
    for concept in _POLARITY_ONLY
)
# Typo targets: content words only, never function words (a typo'd object must not vanish).
_FUZZY_TARGETS: dict[str, tuple[str, ...]] = {}
for _word in sorted(_LEXICON):
    if "_" not in _word and len(_word) >= 4:
        _FUZZY_TARGETS[_word[0]] = (*_FUZZY_TARGETS.get(_word[0], ()), _word)


def _edit_distance(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance (a swap of neighbours counts 1), capped at limit + 1."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


def _typo_limit(word: str) -> int:
    return 0 if len(word) < 5 else (1 if len(word) < 8 else 2)


def _stem_candidates(word: str) -> Iterable[str]:
    yield word
    for suffix, replacement in (
        ("ies", "y"),
        ("es", ""),
        ("s", ""),
        ("ing", ""),
        ("ing", "e"),
        ("ed", ""),
        ("ed", "e"),
        ("d", ""),
        ("ment", ""),
        ("ly", ""),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)] + replacement
            yield stem
            if suffix in ("ing", "ed") and len(stem) >= 4 and stem[-1] == stem[-2]:
                yield stem[:-1]  # shipped -> ship, cancelled -> cancel


@lru_cache(maxsize=8192)
def _classify(word: str) -> tuple[Kind, str] | None:
    """(kind, concept) of a known word; None for a word the lexicon does not know."""
    for candidate in _stem_candidates(word):
        if candidate in _LEXICON:
            return _LEXICON[candidate]
        if candidate in _STOPWORD_SET:
            return (Kind.STOP, candidate)
    limit = _typo_limit(word)
    if limit:
        matches = {
            _LEXICON[target]
            for target in _FUZZY_TARGETS.get(word[0], ())
            if _edit_distance(word, target, limit) <= limit
        }
        if len(matches) == 1:  # an ambiguous typo stays unknown
            return matches.pop()
    return None


def _number(text: str) -> str:
    try:
        value = Decimal(text.replace(",", ""))
    except InvalidOperation:
        return text
    return format(value.normalize(), "f")


@dataclass(frozen=True, slots=True)
class Analysis:
    """What the guard compares; each concept maps back to the word that named it (reasons)."""

    numbers: tuple[str, ...]
    negations: tuple[str, ...]
    negated: frozenset[str]  # what each negation applies to: the next content word's concept
    concepts: dict[tuple[Kind, str], str]
    unknown: dict[str, str]  # stem -> word, for words the lexicon does not know
    order: tuple[str, ...]  # concepts and unknown stems in order of first mention
    directional: bool


def _tokens(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", text).lower()
    for pattern, replacement in _PHRASES:
        text = pattern.sub(replacement, text)
    tokens: list[str] = []
    for raw in _TOKEN.findall(text):
        token = raw.strip(".,")
        if not token:
            continue
        if token[0] in _CURRENCY:
            tokens.append(_CURRENCY[token[0]])
            token = token[1:].strip(".,")
            if not token:
                continue
        if token[-1] in _CURRENCY:
            tokens.extend([token[:-1], _CURRENCY[token[-1]]])
            continue
        tokens.append(token)
    return tokens


def _unknown_stem(word: str) -> str:
    # plurals of words the lexicon does not know: "dogs" = "dog", "boxes" = "box"
    if len(word) > 4 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


@lru_cache(maxsize=4096)
def analyse(text: str) -> Analysis:
    numbers: list[str] = []
    negations: list[str] = []
    negated: set[str] = set()
    concepts: dict[tuple[Kind, str], str] = {}
    unknown: dict[str, str] = {}
    order: list[str] = []
    directional = False
    pending_negation = False

    def mention(key: str) -> None:
        nonlocal pending_negation
        if pending_negation and key not in ("toward", "away"):  # "unable to log in"
            negated.add(key)
            pending_negation = False
        if key not in order:
            order.append(key)

    for token in _tokens(text):
        if _NUMBER.match(token):
            numbers.append(_number(token))
            mention(f"#{numbers[-1]}")
            continue
        if match := _ORDINAL.match(token):
            numbers.append(_number(match.group(1)))
            mention(f"#{numbers[-1]}")
            continue
        if (match := _NUMBER_UNIT.match(token)) and _classify(match.group(2)) is not None:
            numbers.append(_number(match.group(1)))  # "5gb", "13inch"
            token = match.group(2)
        if token in _NUMBER_WORDS:
            numbers.append(_NUMBER_WORDS[token])
            mention(f"#{numbers[-1]}")
            continue
        if token in _NEGATIONS:
            negations.append(token)
            pending_negation = True
            continue
        if token in _DIRECTION_WORDS:
            directional = True
            continue
        known = _classify(token)
        if known is None and token.startswith("un") and len(token) > 4:
            # "unopened", "unused", "unknown": a negation of the rest of the word
            rest = _classify(token[2:])
            if rest is not None:
                negations.append(token)
                pending_negation = True
                known = rest
        if known is None:
            stem = _unknown_stem(token)
            unknown.setdefault(stem, token)
            mention(stem)  # model codes ("s23"), names, places: presumed specific
            continue
        kind, concept = known
        if kind is not Kind.STOP:
            concepts.setdefault(known, token)
            mention(concept)
    if pending_negation:
        negated.add("")  # "why not?": a negation of nothing named
    return Analysis(
        numbers=tuple(numbers),
        negations=tuple(negations),
        negated=frozenset(negated),
        concepts=concepts,
        unknown=unknown,
        order=tuple(order),
        directional=directional,
    )


def _unmatched_unknown(mine: dict[str, str], theirs: dict[str, str]) -> list[str]:
    """Unknown words of one side with no equal or typo-close word on the other side."""
    out = []
    for stem, word in mine.items():
        if stem in theirs:
            continue
        limit = _typo_limit(stem)
        if limit and any(
            other[:1] == stem[:1] and _edit_distance(stem, other, limit) <= limit
            for other in theirs
        ):
            continue
        out.append(word)
    return out


def _action_key(concept: str) -> str:
    # Words at the same pole of an axis are one action ("cancel" = "stop" = "unsubscribe").
    pole = _POLE.get(concept)
    return concept if pole is None else f"axis{pole[0]}:{pole[1]}"


def _actions(side: Analysis) -> dict[str, str]:
    """action key -> word, in order of mention."""
    out: dict[str, str] = {}
    for (kind, concept), word in side.concepts.items():
        if kind is Kind.ACTION:
            out.setdefault(_action_key(concept), word)
    return out


def _unmatched(side: Analysis, other: Analysis, kinds: tuple[Kind, ...]) -> list[str]:
    theirs = {concept for (_, concept) in other.concepts}
    return [
        word
        for (kind, concept), word in side.concepts.items()
        if kind in kinds and concept not in theirs
    ]


def _quote(words: Iterable[str]) -> str:
    return ", ".join(f"'{word}'" for word in words) or "-"


def lexical_guard(*, query: str, phrasing: str) -> GuardResult:
    """Whether the two texts may be treated as the same question; the reason names why not."""
    a, b = analyse(query), analyse(phrasing)

    # 1. numbers, in order
    if a.numbers != b.numbers:
        return GuardResult(
            False, f"numbers differ: [{', '.join(a.numbers)}] vs [{', '.join(b.numbers)}]"
        )
    # 2. negation: on one side only, or negating different things
    if bool(a.negations) != bool(b.negations):
        return GuardResult(
            False, f"negation on one side only: {_quote(a.negations)} vs {_quote(b.negations)}"
        )
    if a.negated != b.negated:
        return GuardResult(
            False,
            f"negations apply to different words: {_quote(sorted(a.negated))} vs "
            f"{_quote(sorted(b.negated))}",
        )
    # 3. polarity: opposite poles of one axis, unless both sides name both
    a_words = {concept: word for (_, concept), word in a.concepts.items()}
    b_words = {concept: word for (_, concept), word in b.concepts.items()}
    for concept_a, word_a in a_words.items():
        pole_a = _POLE.get(concept_a)
        if pole_a is None or concept_a in b_words:
            continue
        for concept_b, word_b in b_words.items():
            pole_b = _POLE.get(concept_b)
            if (
                pole_b is not None
                and pole_b[0] == pole_a[0]
                and pole_b[1] != pole_a[1]
                and concept_b not in a_words
            ):
                return GuardResult(False, f"opposite meaning: '{word_a}' vs '{word_b}'")
    # 4. direction: "from X to Y" vs "from Y to X"
    if a.directional and b.directional:
        shared = [key for key in a.order if key in b.order]
        b_shared = [key for key in b.order if key in shared]
        if shared != b_shared:
            return GuardResult(
                False, f"same terms in another order: {_quote(shared)} vs {_quote(b_shared)}"
            )
    # 5. subjects: specific objects, qualifiers and unknown words must be on both sides
    a_only = _unmatched(a, b, (Kind.OBJECT, Kind.QUALIFIER)) + _unmatched_unknown(
        a.unknown, b.unknown
    )
    b_only = _unmatched(b, a, (Kind.OBJECT, Kind.QUALIFIER)) + _unmatched_unknown(
        b.unknown, a.unknown
    )
    if a_only or b_only:
        return GuardResult(False, f"different subject: {_quote(a_only)} vs {_quote(b_only)}")
    # 6. actions and soft words: one side may add some, but not swap them for others
    a_actions, b_actions = _actions(a), _actions(b)
    a_rest = [
        w for k, w in a_actions.items() if k not in b_actions and k not in _POLARITY_ONLY_KEYS
    ]
    b_rest = [
        w for k, w in b_actions.items() if k not in a_actions and k not in _POLARITY_ONLY_KEYS
    ]
    a_rest += _unmatched(a, b, (Kind.SOFT,))
    b_rest += _unmatched(b, a, (Kind.SOFT,))
    if a_rest and b_rest:
        return GuardResult(False, f"different wording: {_quote(a_rest)} vs {_quote(b_rest)}")
    # 7. the same actions in another order ("recover a deleted order" vs "delete a recovered")
    a_order = [k for k in a_actions if k in b_actions and k not in _POLARITY_ONLY_KEYS]
    b_order = [k for k in b_actions if k in a_actions and k not in _POLARITY_ONLY_KEYS]
    if a_order != b_order:
        return GuardResult(
            False,
            "actions in another order: "
            f"{_quote(a_actions[k] for k in a_order)} vs {_quote(b_actions[k] for k in b_order)}",
        )
    return GuardResult(True, "lexical guard passed")


def decide(
    *,
    query: str,
    candidates: Sequence[Candidate],
    threshold: float = CALIBRATED_THRESHOLD,
) -> MatchDecision | None:
    """The best candidate that clears the threshold and the guard; else why the best failed.

    None when there are no candidates. Candidates are tried best score first, so a near miss
    that outscores the right entry ("cancel my subscription" for "cancel my order") is vetoed
    and the right entry can still answer.
    """
    rejection: MatchDecision | None = None
    for candidate in sorted(candidates, key=lambda c: c.score, reverse=True):
        if candidate.score < threshold:
            if rejection is None:
                rejection = _decision(
                    candidate, False, f"score {candidate.score:.3f} < threshold {threshold:.2f}"
                )
            break
        guard = lexical_guard(query=query, phrasing=candidate.phrasing)
        if guard.passed:
            return _decision(
                candidate, True, f"score {candidate.score:.3f} >= {threshold:.2f}; {guard.reason}"
            )
        if rejection is None:
            rejection = _decision(candidate, False, f"vetoed: {guard.reason}")
    return rejection


def _decision(candidate: Candidate, accepted: bool, reason: str) -> MatchDecision:
    return MatchDecision(
        entry_id=candidate.entry_id,
        phrasing=candidate.phrasing,
        score=candidate.score,
        accepted=accepted,
        reason=reason,
    )
