#!/bin/sh
# llm-decode --json-schema: generation constrained to JSON that validates.
# The outputs are checked by Python's json and jsonschema, not the engine.
. tests/lib.sh
D="$BIN/llm-decode"
T="$BIN/llm-tokenize"

# name, then the schema (JSON has no raw tab)
cat >"$TMP/schemas" <<'EOF'
record	{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"},"ok":{"type":"boolean"},"tags":{"type":"array","items":{"enum":["red","green","blue"]},"maxItems":3}},"required":["name","age"]}
point	{"title":"a point","type":"object","properties":{"kind":{"const":"point"},"at":{"type":"array","items":{"type":"number"},"minItems":2,"maxItems":2},"label":{"anyOf":[{"type":"string","minLength":1,"maxLength":5},{"type":"null"}]}},"required":["kind","at","label"],"additionalProperties":false}
tree	{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}},"$ref":"#/$defs/node"}
enum	{"enum":["yes","no",1,null,{"a":[true]}]}
map	{"type":"object","additionalProperties":{"type":"boolean"}}
types	{"type":["integer","string","boolean"],"maxLength":4}
oneof	{"oneOf":[{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false},{"type":"array","items":{"type":"string","maxLength":3},"minItems":1,"maxItems":2}]}
optional	{"type":"object","properties":{"a":{"type":"null"},"b":{"type":"boolean"},"c":{"type":"string","minLength":2}}}
ranged	{"type":"object","properties":{"age":{"type":"integer","minimum":0,"maximum":120},"t":{"type":"integer","exclusiveMinimum":-5.5,"exclusiveMaximum":5},"n":{"minimum":1000}},"required":["age","t","n"]}
any	{}
open	{"type":"object","properties":{"a":{"type":"integer"},"ab":{"type":"string","maxLength":3}},"required":["a"],"additionalProperties":true}
extra	{"type":"object","properties":{"id":{"type":"integer"}},"additionalProperties":{"type":"boolean"}}
tuple	{"type":"array","prefixItems":[{"type":"integer"},{"enum":["a","b"]}],"items":{"type":"boolean"},"maxItems":4}
numrange	{"type":"number","minimum":0.5,"maximum":2.25}
numneg	{"type":"number","exclusiveMinimum":-1.5,"exclusiveMaximum":0}
numtiny	{"type":["number","null"],"exclusiveMinimum":1e-3,"maximum":1e3,"minimum":-7}
pattern	{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"},"word":{"pattern":"^(?:yes|no)!?$"},"note":{"type":["string","null"],"pattern":"^[^\\n]{0,20}\\.$"}},"required":["code","word","note"]}
formats	{"type":"object","properties":{"d":{"format":"date"},"t":{"format":"time"},"dt":{"type":"string","format":"date-time"},"id":{"format":"uuid"}},"required":["d","t","dt","id"]}
tuple7	{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","items":[{"type":"string","maxLength":3},{"type":"null"}],"additionalItems":false,"minItems":1}
EOF

have_jsonschema() {
	command -v python3 >/dev/null || fail "python3 is needed"
	python3 -c 'import jsonschema' 2>/dev/null ||
		skip "python3's jsonschema module is not installed (Debian: python3-jsonschema)"
}

# Whether jsonschema checks the formats the grammar makes (date-time and
# time need its rfc3339-validator, which Debian does not package).
have_format_checks() {
	python3 -c 'import jsonschema, sys
c = jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers
sys.exit(not all(f in c for f in ("date", "time", "date-time", "uuid")))' 2>/dev/null
}

# expect WANT SCHEMAFILE TEXTFILE MESSAGE: queue a judgement of the text
# for judge, WANT one of
#   valid     JSON that validates (by 2020-12, or the draft its $schema
#             names), formats checked, and an object's members in the
#             order of the schema's properties, the undeclared ones after
#   valid-any the same in any order
#   invalid   not valid, or not JSON
#   notjson   not JSON
# Python takes half a second to import jsonschema, and there are hundreds
# of texts, so one Python judges them all.
expect() {
	qf=$TMP/queue
	qn=$(($( [ -f "$qf" ] && wc -l <"$qf" || echo 0) + 1))
	cp "$2" "$qf.$qn.schema" && cp "$3" "$qf.$qn.text" || fail "cp"
	printf '%s\t%s\t%s\n' "$1" "$qn" "$4" >>"$qf"
}

# judge: every judgement expect queued; fails with each that does not hold.
judge() {
	[ -f "$TMP/queue" ] || return 0
	python3 - "$TMP/queue" <<'PYEOF' || fail "the validator disagrees"
import json, sys, jsonschema
q = sys.argv[1]
bad = 0
for line in open(q, encoding="utf-8"):
    want, n, msg = line.rstrip("\n").split("\t", 2)
    schema = json.load(open("%s.%s.schema" % (q, n)))
    text = open("%s.%s.text" % (q, n), encoding="utf-8").read()
    try:
        v = json.loads(text)
        isjson = True
    except ValueError:
        isjson = False
    ok = isjson
    if ok:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        ok = cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(v)
    if ok and want != "valid-any" and isinstance(v, dict) and "properties" in schema:
        order = [k for k in schema["properties"] if k in v]
        ok = list(v) == order + [k for k in v if k not in schema["properties"]]
    held = {"valid": ok, "valid-any": ok, "invalid": not ok, "notjson": not isjson}[want]
    if not held:
        print("%s: want %s: %s" % (msg, want, text))
        bad += 1
sys.exit(bad > 0)
PYEOF
	rm -f "$TMP"/queue*
}

# Outputs for many seeds, on a random model with a 49152-token
# vocabulary, the tiny one, and stories260K: each is whole (and then it
# validates) or cut by -n (and then --score says it is a start).  Most
# schemas complete within -n; an open one (a map's names, any value) may not.
check_model() {
	m=$1
	completed=0
	while IFS='	' read -r name s; do
		printf '%s\n' "$s" >"$TMP/$name.json"
		whole=0
		for seed in 1 2 3 4 5 6; do
			echo 1 >"$TMP/ids"
			echo 1 | "$D" -m "$m" --json-schema "$s" -n 150 --seed $seed >>"$TMP/ids" ||
				fail "$name, seed $seed: exit $?"
			"$D" -m "$m" --score --json-schema "@$TMP/$name.json" <"$TMP/ids" >"$TMP/score" 2>"$TMP/err"
			rc=$?
			"$T" -m "$m" -d -n <"$TMP/ids" >"$TMP/text"
			case $rc in
			0)	whole=$((whole + 1))
				expect valid "$TMP/$name.json" "$TMP/text" "$m: $name, seed $seed" ;;
			3)	[ "$(wc -l <"$TMP/ids")" -eq 151 ] ||
					fail "$name, seed $seed: a start, but not cut by -n: $(cat "$TMP/text")" ;;
			*)	fail "$name, seed $seed: exit $rc: $(cat "$TMP/err")" ;;
			esac
		done
		[ $whole -gt 0 ] && completed=$((completed + 1))
	done <"$TMP/schemas"
	[ $completed -ge 9 ] || fail "$m: only $completed schemas of $(wc -l <"$TMP/schemas") completed"
	judge
}

outputs_validate_on_a_random_model() {
	have_jsonschema
	[ -f "$TMP/v49152.gguf" ] || "$PWD/tools/mkmodel" -t q8_0 -v 49152 -o "$TMP/v49152.gguf" >&2 ||
		fail "mkmodel"
	check_model "$TMP/v49152.gguf"
	check_model "$(tiny f32)"
}

outputs_validate_on_stories260K() {
	need "$SHARED/models/stories260K.gguf"
	have_jsonschema
	check_model "$SHARED/models/stories260K.gguf"
}

# Texts scored under a schema: whole, a start, or left; Python's
# jsonschema agrees (valid, not JSON yet, invalid) but where the grammar
# is narrower by design (left*: members out of order, or not declared
# where additionalProperties is absent, a name twice, an undeclared name
# with an escape before it leaves the declared ones, surrogate escapes,
# more than 16 digits).
texts_are_judged_as_a_validator_judges_them() {
	have_jsonschema
	m=$(tiny f32)
	n=0
	while IFS='	' read -r name text want; do
		s=$(sed -n "s/^$name	//p" "$TMP/schemas")
		if [ "$name" = formats ] && ! have_format_checks; then
			n=$((n + 1))	# no judge for them here
			continue
		fi
		printf '%s\n' "$s" >"$TMP/s.json"
		printf '%s' "$text" >"$TMP/text"
		"$T" -m "$m" -- "$text" | "$D" -m "$m" --score --json-schema "$s" >"$TMP/out" 2>/dev/null
		rc=$?
		case "$want" in
		whole)	[ $rc -eq 0 ] || fail "$name: $text: exit $rc"
			expect valid "$TMP/s.json" "$TMP/text" "$name: whole" ;;
		start)	[ $rc -eq 3 ] || fail "$name: $text: exit $rc"
			expect notjson "$TMP/s.json" "$TMP/text" "$name: a start" ;;
		left)	[ $rc -eq 4 ] || fail "$name: $text: exit $rc"
			expect invalid "$TMP/s.json" "$TMP/text" "$name: left" ;;
		left\*)	[ $rc -eq 4 ] || fail "$name: $text: exit $rc"
			expect valid-any "$TMP/s.json" "$TMP/text" "$name: left, narrower by design" ;;
		esac
		n=$((n + 1))
	done <<'EOF'
record	{"name": "bob", "age": 3}	whole
record	{"name":"x","age":-12,"ok":true,"tags":["red", "blue"]}	whole
record	{ "name" : "x" ,"age":0 , "tags" : [ ] }	whole
record	{"name": "\u00e9t\u00e9 \"q\"", "age": 0}	whole
record	{"name":"x","age":1	start
record	{"age":3}	left
record	{"name":"x"}	left
record	{"name":"x","age":1.5}	left
record	{"name":"x","age":01}	left
record	{"name":"x","age":1,"tags":["red","red","red","red"]}	left
record	{"name":"abcdefghijklm","age":1}	left
record	{"name":"x","age":1,"tags":["pink"]}	left
record	{"age":1,"name":"x"}	left*
record	{"name":"x","age":1,"color":"red"}	left*
record	{"name":"\ud83d\ude00","age":1}	left*
record	{"name":"x","age":12345678901234567}	left*
point	{"kind":"point","at":[1.5,-2e3],"label":null}	whole
point	{"kind":"point","at":[0,1E-2],"label":"abc"}	whole
point	{"kind":"point","at":[1],"label":null}	left
point	{"kind":"line","at":[0,0],"label":null}	left
point	{"kind":"point","at":[0,0],"label":"abcdef"}	left
point	{"kind":"point","at":[0,0],"label":""}	left
point	{"kind":"point","at":[0,0]}	left
tree	{"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]}	whole
tree	{"v":1,"kids":[{"v":2},{"v":3},{"v":4}]}	left
tree	{"v":1,"kids":[{}]}	left
enum	{"a":[true]}	whole
enum	null	whole
enum	1	whole
enum	"no"	whole
enum	2	left
enum	"maybe"	left
map	{"x": true, "y z": false}	whole
map	{}	whole
map	{"x": 1}	left
types	"abcd"	whole
types	-7	whole
types	false	whole
types	"abcde"	left
types	null	left
oneof	{"n":5}	whole
oneof	["ab","c"]	whole
oneof	[]	left
oneof	["abcd"]	left
oneof	{"n":5,"m":1}	left
optional	{}	whole
optional	{"c":"xy"}	whole
optional	{"a":null,"c":"xyz"}	whole
optional	{"b":true}	whole
optional	{"c":"x"}	left
optional	{"a":null,}	left
ranged	{"age": 0, "t": -5, "n": 1000}	whole
ranged	{"age": 120, "t": 4, "n": 123456}	whole
ranged	{"age": 121	left
ranged	{"age": -1	left
ranged	{"age": 7, "t": 5	left
ranged	{"age": 7, "t": -6	left
ranged	{"age": 7, "t": 0, "n": 999}	left
ranged	{"age": 07	left
any	{"a": [1, {"b": null}], "c": "d"}	whole
any	[1, 2	start
open	{"a": 1, "zz": [1, {"q": null}]}	whole
open	{"a": 1, "ab": "xy", "c": true, "d": 2}	whole
open	{"a": 1, "abc": 0, "b": "", "": null}	whole
open	{"a": 1, "é": 0}	whole
open	{"a": 1, "\u00e9": 0}	left*
open	{"a": 1, "ab": 5}	left
open	{"zz": 1}	left
open	{"a": 1, "ab": "x", "ab": "y"}	left*
open	{"a": 1, "a": 2}	left*
open	{"zz": 1, "a": 1}	left*
extra	{"id": 3, "x": true, "y z": false}	whole
extra	{"x": true}	whole
extra	{}	whole
extra	{"id": 3, "x": 1}	left
extra	{"id": 3, "\u0069d": true}	left
extra	{"id": 3, "i\u0064x": true}	left*
tuple	[1, "a", true, false]	whole
tuple	[1]	whole
tuple	[]	whole
tuple	[-4, "b"]	whole
tuple	[1, "c"]	left
tuple	[1, "a", 3]	left
tuple	[1, "a", true, true, true]	left
tuple	["a"]	left
tuple7	["ab"]	whole
tuple7	["ab", null]	whole
tuple7	[]	left
tuple7	["ab", null, null]	left
tuple7	["abcd"]	left
tuple7	[null]	left
numrange	0.5	whole
numrange	2.25	whole
numrange	2.2500	whole
numrange	1	whole
numrange	1.999	whole
numrange	0.49	left
numrange	2.2500001	left
numrange	2.26	left
numrange	3	left
numrange	-1	left
numrange	0.5e0	left*
numneg	-1.4999	whole
numneg	-0.0001	whole
numneg	-1	whole
numneg	-1.5	left
numneg	0	left
numneg	-2	left
numtiny	0.0011	whole
numtiny	1000	whole
numtiny	0.5	whole
numtiny	null	whole
numtiny	0.0009	left
numtiny	1000.0001	left
numtiny	-1	left
numtiny	1e2	left*
pattern	{"code": "AB-123", "word": "yes!", "note": "ok."}	whole
pattern	{"code":"ZZ-000","word":"no","note":null}	whole
pattern	{"code": "AB-123", "word": "no", "note": "\"a\\b\"\t."}	whole
pattern	{"code": "ab-123"	left
pattern	{"code": "AB-1234"	left
pattern	{"code": "AB-123", "word": "nope"	left
pattern	{"code": "AB-123", "word": "no", "note": "a\nb."}	left
pattern	{"code": "AB-123", "word": "no", "note": "abc"}	left
pattern	{"code": "\u0041B-123", "word": "no", "note": null}	left*
formats	{"d": "2024-02-29", "t": "23:59:59Z", "dt": "2000-02-29T00:00:00.5+01:00", "id": "123e4567-e89b-12d3-a456-426614174000"}	whole
formats	{"d": "0001-12-31", "t": "00:00:00.000-23:59", "dt": "9999-12-31t23:59:59z", "id": "123E4567-E89B-12D3-A456-426614174000"}	whole
formats	{"d": "2023-02-29"	left
formats	{"d": "1900-02-29"	left
formats	{"d": "0000-01-01"	left
formats	{"d": "2024-04-31"	left
formats	{"d": "2024-04-30", "t": "24:00:00Z"	left
formats	{"d": "2024-04-30", "t": "12:00:00", "dt"	left
formats	{"d": "2024-04-30", "t": "12:00:60Z"	left
formats	{"d": "2024-04-30", "t": "12:00:00Z", "dt": "2024-04-30 12:00:00Z"	left
formats	{"d": "2024-04-30", "t": "12:00:00Z", "dt": "2024-04-30T12:00:00Z", "id": "123e4567e89b12d3a456426614174000"}	left
EOF
	[ $n -eq 136 ] || fail "$n cases read"
	judge
}

# Bounds on numbers, random ones (some written with exponents) against
# random numbers and numbers next to them, judged by --score as Python's
# exact decimals judge them:
# inside whole, outside left (or a start, that more digits would make
# inside), never the other way.
number_bounds_agree_with_exact_decimals() {
	command -v python3 >/dev/null || fail "python3 is needed"
	python3 - "$(tiny f32)" "$T" "$D" <<'EOF' || fail "the bounds disagree"
import json, random, subprocess, sys
from decimal import Decimal
m, tok, dec = sys.argv[1:4]
random.seed(3)
def number():
    digits = "".join(random.choice("0123456789") for _ in range(random.randint(0, 3)))
    return ("-" if random.random() < 0.4 else "") + str(random.randint(0, 30)) + ("." + digits if digits else "")
def bound():
    x = number()
    if random.random() < 0.4:	# the same value with an exponent
        e = random.randint(-3, 3)
        x = format(Decimal(x).scaleb(-e), "f") + "e" + str(e)
    return x
bad = judged = 0
for case in range(120):
    schema, checks = {"type": "number"}, []
    for keys in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if random.random() < 0.8:
            b, key = bound(), random.choice(keys)
            schema[key] = json.loads(b)
            checks.append((key, Decimal(b)))
    text = number()
    if checks and random.random() < 0.6:	# near a bound: its digits, then one more or less at a place
        near = random.choice(checks)[1] + random.choice((-1, 0, 1)) * Decimal(10) ** -random.randint(0, 4)
        text = format(near.normalize(), "f")
    v, inside = Decimal(text), True
    for key, b in checks:
        inside &= {"minimum": v >= b, "exclusiveMinimum": v > b, "maximum": v <= b, "exclusiveMaximum": v < b}[key]
    ids = subprocess.run([tok, "-m", m, "--", text], capture_output=True, text=True).stdout
    r = subprocess.run([dec, "-m", m, "--score", "--json-schema", json.dumps(schema)], input=ids,
        capture_output=True, text=True)
    if r.returncode == 2 and "no valid value" in r.stderr:
        continue	# an empty range: nothing is inside
    judged += 1
    if r.returncode != (0 if inside else 4) and not (not inside and r.returncode == 3):
        bad += 1
        print("%s on %s: exit %d, inside %s" % (json.dumps(schema), text, r.returncode, inside))
print("%d judged, %d disagree" % (judged, bad))
sys.exit(bad > 0 or judged < 60)
EOF
}

# Patterns judged as ECMA-262 judges them: node's RegExp (the u flag)
# against --score of each string's JSON text, on random strings and some
# chosen to match; both verdicts must occur.  The strings' texts are
# JSON's shortest (json.dumps), as the grammar writes them.
patterns_agree_with_ecma262() {
	command -v python3 >/dev/null || fail "python3 is needed"
	command -v node >/dev/null || skip "node is not installed (Debian: nodejs)"
	python3 - "$(tiny f32)" "$T" "$D" <<'PYEOF2' || fail "the patterns disagree"
import json, random, subprocess, sys
m, tok, dec = sys.argv[1:4]
random.seed(5)
cases = {
    r"^[a-z]+$": ["abc", "x"],
    r"^\d{3}-\d{2,4}$": ["123-45", "123-4567"],
    r"^(?:ab|cd)*e?$": ["", "abcde", "cdab"],
    r"colou?r": ["a color", "colour!"],
    r"^\s*\S+\s*$": [" x ", "\tab\n"],
    r'^[^"\\]*$': ["", "a b", 'a"'],
    r"^.{2,5}$": ["ab", "a\u00e9\U0001F600", "a\nb"],
    r"^[\w.-]+@[\w-]+\.[a-z]{2,3}$": ["a.b@c-d.ab", "x@y.com"],
    r"^(a|b|)c{0}d{1}$": ["ad", "d", "bd"],
    r"^[\u00e0-\u00ff]+|\d$": ["\u00e9\u00e0", "a1"],
    r"^\x41\u{1F600}?\t?$": ["A", "A\U0001F600\t"],
    r"^[^\d\s]+$": ["ab", "a b"],
    r"a|^b|c$": ["xa", "bx", "xc", "xbx"],
    r"^(?<year>\d{4})-(?:0[1-9]|1[0-2])$": ["2024-01", "2024-12", "2024-13"],
    r"^[\]\-\\^]{1,3}?$": ["]", "-\\^", "^^^^"],
    r'^\u0022\\$': ['"\\'],
    r"^(\d+\.)+\d+$": ["1.2.3", "1."],
    r"^[^\n]*\n$": ["ab\n", "a\nb\n"],
    r"[\s\S]": ["a", ""],
    r"": ["", "x"],
}
alphabet = list("ab cde-.@x1234_\"\\\t\nA\u00e9") + ["\U0001F600", "\u2028", "\x01"]
pairs = []
for p, chosen in cases.items():
    pairs += [(p, t) for t in chosen]
    for _ in range(8):
        pairs.append((p, "".join(random.choice(alphabet) for _ in range(random.randint(0, 7)))))
js = "const [pairs] = [JSON.parse(require('fs').readFileSync(0, 'utf8'))];" \
     "console.log(JSON.stringify(pairs.map(([p, t]) => new RegExp(p, 'u').test(t))));"
verdicts = json.loads(subprocess.run(["node", "-e", js], input=json.dumps(pairs), capture_output=True,
    text=True, check=True).stdout)
bad, seen = 0, set()
for (p, t), want in zip(pairs, verdicts):
    text = json.dumps(t, ensure_ascii=False)
    ids = subprocess.run([tok, "-m", m, "--", text], capture_output=True, text=True).stdout
    r = subprocess.run([dec, "-m", m, "--score", "--json-schema", json.dumps({"type": "string", "pattern": p})],
        input=ids, capture_output=True, text=True)
    seen.add(want)
    if r.returncode != (0 if want else 4):
        bad += 1
        print("pattern %s on %s: exit %d, ECMA-262 says %s %s" % (p, text, r.returncode, want, r.stderr.strip()))
print("%d judged, %d disagree" % (len(pairs), bad))
sys.exit(bad > 0 or seen != {True, False})
PYEOF2
}

# Dates and times judged as Python's datetime and RFC 3339's validator
# judge them (jsonschema's format checker): random dates near the ends of
# months, in leap years and century years, and times near their bounds.
formats_agree_with_a_validator() {
	have_jsonschema
	have_format_checks || skip "python3's jsonschema checks no date-time or time (it needs rfc3339-validator)"
	python3 - "$(tiny f32)" "$T" "$D" <<'PYEOF2' || fail "the formats disagree"
import json, random, subprocess, sys, jsonschema
m, tok, dec = sys.argv[1:4]
random.seed(7)
fc = jsonschema.Draft202012Validator.FORMAT_CHECKER
def valid(f, v):
    try:
        fc.check(v, f)
        return True
    except jsonschema.exceptions.FormatError:
        return False
def date():
    y = random.choice([0, 1, 4, 100, 200, 400, 1900, 2000, 2023, 2024, 2100, 9999, random.randint(1, 9999)])
    return "%04d-%02d-%02d" % (y, random.choice([0, 1, 2, 2, 2, 4, 6, 9, 11, 12, 13]), random.choice([0, 1, 28, 29, 29, 30, 31, 32]))
def time():
    t = "%02d:%02d:%02d" % (random.choice([0, 9, 23, 24]), random.choice([0, 59, 60]), random.choice([0, 59, 60]))
    t += random.choice(["", ".5", ".123456789", "."])
    return t + random.choice(["Z", "z", "+01:00", "-23:59", "+24:00", "+00:60", "", "+0100"])
def uuid():
    h = "0123456789abcdefABCDEF"
    return "-".join("".join(random.choice(h) for _ in range(n)) for n in random.choice([(8, 4, 4, 4, 12), (8, 4, 4, 12)]))
cases = [("date", "%04d-02-29" % y) for y in (4, 100, 400, 1900, 2000, 2023, 2024, 2100, 9996)]
cases += [("date", date()) for _ in range(60)] + [("time", time()) for _ in range(40)]
cases += [("date-time", date() + random.choice("Tt ") + time()) for _ in range(30)] + [("uuid", uuid()) for _ in range(10)]
bad, seen = 0, set()
for f, v in cases:
    want = valid(f, v)
    seen.add(want)
    ids = subprocess.run([tok, "-m", m, "--", json.dumps(v)], capture_output=True, text=True).stdout
    r = subprocess.run([dec, "-m", m, "--score", "--json-schema", json.dumps({"format": f})], input=ids,
        capture_output=True, text=True)
    if r.returncode != (0 if want else 4):
        bad += 1
        print("%s %s: exit %d, the validator says %s" % (f, v, r.returncode, want))
print("%d judged, %d disagree" % (len(cases), bad))
sys.exit(bad > 0 or seen != {True, False})
PYEOF2
}

# A schema that cannot be used: exit 2, one line naming the place, before any work (no model is read).
bad_schemas_are_usage_errors() {
	while IFS='	' read -r s want; do
		echo 1 | "$D" -m "$TMP/no-model.gguf" --json-schema "$s" >"$TMP/out" 2>"$TMP/err"
		rc=$?
		[ $rc -eq 2 ] || fail "exit $rc for: $s: $(cat "$TMP/err")"
		[ ! -s "$TMP/out" ] || fail "output for: $s"
		[ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "not one line: $(cat "$TMP/err")"
		grep -qF -- "llm-decode: --json-schema: $want" "$TMP/err" || fail "$s: $(cat "$TMP/err")"
	done <<'EOF'
{"properties":{"age":{"type":"integer","format":"int32"}}}	/properties/age: format "int32": not supported (date, time, date-time and uuid are)
{"type":"string","format":"email"}	/: format "email": not supported
{"type":"string","format":"date","pattern":"x"}	/: "pattern" beside "format": not supported
{"type":"string","pattern":"x","maxLength":3}	/: "maxLength" beside "pattern": not supported
{"pattern":5}	/: pattern: expected a string
{"type":"integer","pattern":"(a"}	/: pattern: at 0: a group with no )
{"pattern":"^(a)\\1$"}	/: pattern: at 4: \1 (a backreference): not supported
{"pattern":"(?<=a)b"}	/: pattern: at 0: (?<= (a lookbehind): not supported
{"pattern":"a\\b"}	/: pattern: at 1: \b (a word boundary): not supported
{"pattern":"\\p{L}"}	/: pattern: at 0: \p (Unicode properties): not supported
{"pattern":"^a{2000}$"}	/: pattern: at 2: a count above 1000: not supported
{"pattern":"a$b"}	/: pattern: at 1: $ inside the pattern: not supported
{"pattern":"[^\\s\\S]"}	/: pattern: at 0: it matches no character a string can hold
{"patternProperties":{"^a":{}}}	/: unsupported keyword "patternProperties"
{"items":{"multipleOf":2}}	/items: unsupported keyword "multipleOf"
{"type":"number","minimum":1,"exclusiveMaximum":1}	/: the schema has no valid value: no number of at most 16 digits before the point and 16 after it is within its bounds
{"type":"number","maximum":true}	/: maximum: expected a number
{"type":"integer","minimum":10,"exclusiveMaximum":10}	/: the schema has no valid value: no integer of at most 16 digits is within its bounds
{"type":"integer","maximum":"3"}	/: maximum: expected a number
{"properties":{"a/b":{"pattern":"(?=x)"}}}	/properties/a~1b: pattern: at 0: (?= (a lookahead): not supported
{"type":"strin"}	/: type: unknown type "strin"
{"type":[]}	/: type: expected a type's name or a list of them
false	/: the schema has no valid value: it is false
{"properties":{"a":{"enum":[1]},"b":{"type":"string","minLength":3,"maxLength":2}},"required":["b"]}	/properties/b: the schema has no valid value: minLength 3 is more than maxLength 2
{"type":"integer","enum":["a",1.5]}	/: the schema has no valid value: no value of its enum is of its type
{"required":["x"],"additionalProperties":false}	/required: the schema has no valid value: "x" is required
{"type":"array","minItems":1,"items":false}	/items: the schema has no valid value: it is false
{"$ref":"#/$defs/x"}	/: $ref "#/$defs/x": no such place in the schema
{"$ref":"other.json#/x"}	/: $ref "other.json#/x": only references within the schema
{"$ref":"#"}	the grammar made of it: rule 'root' is left-recursive
{"type":"string","$ref":"#/$defs/x"}	/: "type" beside "$ref": not supported
{"allOf":[{},{}]}	/: allOf of more than one schema: not supported
{"anyOf":[]}	/: anyOf: expected a non-empty array of schemas
{"type":"string","maxLength":1001}	/: maxLength 1001: not supported above 1000
{"type":"string","maxLength":-1}	/: maxLength: expected a non-negative integer
{"prefixItems":[]}	/: prefixItems: expected a non-empty array of schemas
{"prefixItems":[{}],"items":[{}]}	/: items as an array beside prefixItems: not supported
{"additionalItems":false}	/: additionalItems without items as an array: not supported
{"type":"array","prefixItems":[{},{"type":"integer","minimum":5,"maximum":4}],"minItems":2}	/prefixItems/1: the schema has no valid value
{"type":"array","items":[{}],"additionalItems":false,"minItems":2}	/additionalItems: the schema has no valid value: it is false
{"required":"a"}	/: required: expected an array of names
{"a":	1:6: unexpected end of the text: expected a value
{"a":1,"a":2}	1:8: a name given twice in one object
{"a":1} x	1:9: text after the value
"\x"	1:2: an unknown escape in a string
EOF
	echo 1 | "$D" -m "$TMP/no-model.gguf" --json-schema '' 2>"$TMP/err"
	[ $? -eq 2 ] && grep -qF -- '--json-schema: 1:1: unexpected end of the text' "$TMP/err" || fail "'': $(cat "$TMP/err")"
	echo 1 | "$D" -m "$TMP/no-model.gguf" --json-schema @"$TMP/none.json" 2>"$TMP/err"
	[ $? -eq 2 ] && grep -qF -- "--json-schema @$TMP/none.json: No such file" "$TMP/err" || fail "$(cat "$TMP/err")"
	printf '{\n  "type": "object",\n  "properties": {"x": {"format": "email"}}\n}\n' >"$TMP/bad.json"
	echo 1 | "$D" -m "$TMP/no-model.gguf" --json-schema @"$TMP/bad.json" 2>"$TMP/err"
	[ $? -eq 2 ] && grep -qF -- "--json-schema $TMP/bad.json: /properties/x: format \"email\": not supported" "$TMP/err" ||
		fail "$(cat "$TMP/err")"
	echo 1 | "$D" -m "$TMP/no-model.gguf" --json-schema @- 2>"$TMP/err"
	[ $? -eq 2 ] && grep -qF -- "--json-schema @-: standard input carries the token ids" "$TMP/err" || fail "$(cat "$TMP/err")"
	echo 1 | "$D" -m "$TMP/no-model.gguf" --json-schema '{}' --grammar 'root ::= "a"' 2>"$TMP/err"
	[ $? -eq 2 ] && grep -qF -- "conflict: one grammar" "$TMP/err" || fail "$(cat "$TMP/err")"
	long=$(awk 'BEGIN { while (n++ < 1001) printf "a" }')
	echo 1 | "$D" -m "$TMP/no-model.gguf" --json-schema "{\"properties\":{\"$long\":{}},\"additionalProperties\":true}" \
		2>"$TMP/err"
	[ $? -eq 2 ] && grep -qF -- "--json-schema: /: a property name of more than 1000 bytes beside" "$TMP/err" ||
		fail "$(cat "$TMP/err")"
}

# --print-grammar: the grammar a schema makes, which as --grammar-file
# generates the same tokens; @FILE and the text alike.
printed_grammar_generates_the_same() {
	m=$(tiny q8_0)
	s=$(sed -n 's/^record	//p' "$TMP/schemas")
	printf '%s\n' "$s" >"$TMP/r.json"
	"$D" --print-grammar --json-schema "$s" >"$TMP/r.gbnf" || fail "exit $?"
	grep -q '^root ::= ' "$TMP/r.gbnf" || fail "$(cat "$TMP/r.gbnf")"
	"$D" --print-grammar --grammar-file "$TMP/r.gbnf" | cmp -s - "$TMP/r.gbnf" || fail "printed again, it differs"
	for seed in 1 2 3; do
		echo 1 | "$D" -m "$m" --json-schema "$s" -n 100 --seed $seed >"$TMP/a" || fail "exit $?"
		echo 1 | "$D" -m "$m" --json-schema "@$TMP/r.json" -n 100 --seed $seed >"$TMP/b" || fail "exit $?"
		echo 1 | "$D" -m "$m" --grammar-file "$TMP/r.gbnf" -n 100 --seed $seed >"$TMP/c" || fail "exit $?"
		[ -s "$TMP/a" ] && cmp -s "$TMP/a" "$TMP/b" && cmp -s "$TMP/a" "$TMP/c" || fail "seed $seed differs"
	done
	"$D" --print-grammar 2>"$TMP/err"
	[ $? -eq 2 ] && grep -q 'needs --grammar' "$TMP/err" || fail "$(cat "$TMP/err")"
}

# --lines: each line validates on its own, as its solo run.
lines_under_a_schema_are_their_solo_runs() {
	m=$(tiny q8_0)
	s=$(sed -n 's/^point	//p' "$TMP/schemas")
	printf '1 5 9\n1\n1 200 3 4\n' >"$TMP/qs"
	: >"$TMP/solo"
	while read -r q; do
		printf '%s\n' $q | "$D" -m "$m" --json-schema "$s" -n 60 --seed 5 | tr '\n' ' ' | sed 's/ $//' >>"$TMP/solo"
		echo >>"$TMP/solo"
	done <"$TMP/qs"
	"$D" -m "$m" --lines -P 3 --json-schema "$s" -n 60 --seed 5 <"$TMP/qs" >"$TMP/lines" || fail "exit $?"
	[ -s "$TMP/lines" ] && cmp -s "$TMP/solo" "$TMP/lines" || fail "$(cat "$TMP/lines")"
}

t bad_schemas_are_usage_errors
t texts_are_judged_as_a_validator_judges_them
t number_bounds_agree_with_exact_decimals
t patterns_agree_with_ecma262
t formats_agree_with_a_validator
t outputs_validate_on_a_random_model
t outputs_validate_on_stories260K
t printed_grammar_generates_the_same
t lines_under_a_schema_are_their_solo_runs
