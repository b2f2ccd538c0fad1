"""Texts that have broken tokenizers: whitespace runs, contractions, digits, combining marks,
emoji sequences, CJK and right-to-left scripts, control characters, and (as bytes) invalid UTF-8."""

TEXTS = [
    "Hello world", "", " ", "  ", "a", "a   b", "a \n\n b", "\n\n\n", "   leading",
    "trailing   ", "\t\ttabs\t", "x \t \n y", "  \n  ", "end with newline\n",
    "I'm don't we'll they've she'd it's you're", "DON'T I'M HE'LL", "'s's 'll ''''", "' s",
    "rock'n'roll", "‘curly’ “quotes”",
    "1234567890" * 10, "3.14159 2,000,000 -42 +7e10", " 42", "x1y2z3", "١٢٣ ४५६ ①②③ Ⅻ ½ ²",
    " " * 1000, "a" + " " * 5000 + "b", "1" * 3000, "!" * 2000, "ab" * 3000, "\n" * 500 + "x",
    "e\u0301 a\u0300\u0301\u0302 n\u0303", "Z\u0351\u0364\u034b\u0303a\u0336l\u0301g\u0327o",
    "\u0915\u094d\u0937\u093f", " \u0301\u0301\u0301 ", "\u0301start with a mark",
    "👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 😀😀😀", "flag 🇫🇷🇩🇪 keycap 1️⃣",
    "日本語のテキスト、カタカナ。", "中文，标点。 漢字", "한국어 텍스트", "مرحبا بالعالم", "שלום עולם",
    "\u00a0nbsp\u00a0 \u2028line\u2029para \u3000ideo \u2003em", "a\u200bb\u200cc\u200dd",
    "\x0b\x0c\r\n\r\n", "\x00\x01\x02\x7f", "\ufeffBOM", "\ufffd\ufffd", "\ue000 private",
    "\U0001d400\U0001d401 math bold", "∑∫√ x²+y² ≤ ∞", "ℕℤℚ", "Ǆǅǆ ﬁ ß ẞ",
    "https://example.com/a_b?q=1&x=%20#frag", "x += 1; // C++ <tag attr='v'/>",
    "<|endoftext", "|> <|", "<|endoftext|", "endoftext", "ÿĀĠĊ", "Ġhello Ċ",
    "mixed 中文 and English and 123 and émoji 🎉!!",
]

# Invalid UTF-8 (as bytes): stray continuation bytes, cut-off characters, overlong forms,
# surrogates, code points above U+10FFFF, and invalid bytes beside spaces and words.
BYTES = [
    b"\xff", b"abc\xffdef", b"\xc3\x28", b"\xe2\x82", b"\xe2\x82\xe2\x82\xac", b"\xed\xa0\x80",
    b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\x80\x81\x82 word", b"  \xff  x", b"word\xff\xfe\xfd word",
    b"\xf0\x9f\x98", b"don\xe2\x80t", b"\xff" * 300, b" \xff", b"\xff ", b"1\xff2", b"\n\xff\n",
    b" \xed\xa0\x80", b" \xc0\xaf", b" \xf4\x90\x80\x80",
]
