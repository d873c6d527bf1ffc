# The python3 side of tests/differential.rs: CPython's own `marshal` module is the oracle.
#
#   python3 -c <this> gen SEED COUNT   prints COUNT random values, one JSON object a line:
#                                      {"hex": marshal.dumps(v, 2), "desc": ..., "repr": ...}
#   python3 -c <this> check            reads one hex marshal value a line and prints, for each,
#                                      marshal.dumps(marshal.loads(b), 2) the same way
#
# "desc" is a typed tree the Rust side builds too: ["none"], ["bool", b], ["int", "decimal"],
# ["float", "big-endian hex of the 64 bits"], ["bytes", hex], ["str", hex of UTF-8],
# ["tuple" | "list" | "set" | "frozenset", item, ...], ["dict", key, value, key, value, ...]
# (items inline, so that a description nests no deeper than the value: serde_json's limit).
# "repr" is repr(v), or null where the Rust repr is not expected to match: sets, whose wire order
# is not their iteration order; and strings with characters Python escapes as non-printable:
# crawlfleet's py_repr knows the common ones (see str_repr_escapes_non_printable_like_python) but
# carries no Unicode tables for the rest (unassigned code points, rare format characters).
import json
import marshal
import random
import struct
import sys

MAX_DEPTH = 64  # crawlfleet's default Limits::max_depth


def describe(v):
    t = type(v)
    if v is None:
        return ["none"]
    if t is bool:
        return ["bool", v]
    if t is int:
        return ["int", str(v)]
    if t is float:
        return ["float", struct.pack(">d", v).hex()]
    if t is bytes:
        return ["bytes", v.hex()]
    if t is str:
        return ["str", v.encode("utf-8", "surrogatepass").hex()]
    if t in (tuple, list, set, frozenset):
        return [t.__name__] + [describe(x) for x in v]
    if t is dict:
        return ["dict"] + [describe(y) for kv in v.items() for y in kv]
    raise TypeError(t)


def repr_comparable(v):
    t = type(v)
    if t in (set, frozenset):
        return False
    if t is str:
        return v.isprintable()
    if t in (tuple, list):
        return all(repr_comparable(x) for x in v)
    if t is dict:
        return all(repr_comparable(k) and repr_comparable(x) for k, x in v.items())
    return True


def line(v, data):
    return json.dumps(
        {
            "hex": data.hex(),
            "desc": describe(v),
            "repr": repr(v) if repr_comparable(v) else None,
        },
        separators=(",", ":"),
    )


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def int_(self):
        r = self.r
        k = r.randrange(8)
        if k == 0:
            return r.randint(-10, 300)
        if k == 1:
            return r.choice([2**31 - 1, -(2**31), 2**31, -(2**31) - 1, 2**63 - 1, -(2**63),
                             2**63, -(2**63) - 1, 2**64, 2**15, 2**30, -(2**45), 2**60 - 1])
        if k == 2:
            return r.randint(-(2**31), 2**31 - 1)
        if k == 3:
            return r.randint(-(2**63), 2**63 - 1)
        if k == 4:
            bits = r.randint(64, 400)
            return r.choice([1, -1]) * r.getrandbits(bits)
        if k == 5:
            return r.choice([1, -1]) * r.getrandbits(r.randint(1, 62))
        return r.randint(-100000, 100000)

    def float_(self):
        r = self.r
        k = r.randrange(6)
        if k == 0:
            return r.choice([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 5e-324,
                             -5e-324, 2.2250738585072014e-308, 2.225073858507201e-308,
                             1.7976931348623157e308, 0.1, 0.25, 1e16, 1e-5, 1e-4, 123456789.0])
        if k == 1:  # any 64 bits: normals, subnormals, NaN payloads
            return struct.unpack("<d", r.getrandbits(64).to_bytes(8, "little"))[0]
        if k == 2:  # a subnormal
            return struct.unpack("<d", r.getrandbits(52).to_bytes(8, "little"))[0] * r.choice([1, -1])
        if k == 3:
            return float(r.randint(-(10**6), 10**6))
        return r.uniform(-1, 1) * 10.0 ** r.randint(-30, 30)

    def bytes_(self):
        r = self.r
        n = r.choice([0, 1, 2, 3, 5, 8, 16, 23, 40]) if r.random() < 0.98 else r.randint(100, 2000)
        if r.random() < 0.5:
            return bytes(r.choice(b"abcXYZ019 '\"\\\t\n\r\x00\x7f/.:-") for _ in range(n))
        return r.getrandbits(8 * n).to_bytes(n, "little") if n else b""

    def str_(self):
        r = self.r
        n = r.choice([0, 1, 2, 4, 7, 12, 30])
        pools = [
            (0x20, 0x7E), (0x00, 0xFF), (0x100, 0x7FF), (0x800, 0xD7FF), (0xE000, 0xFFFF),
            (0x10000, 0x10FFFF), (0x1F600, 0x1F64F),
        ]
        out = []
        for _ in range(n):
            if r.random() < 0.01:
                out.append(chr(r.randint(0xD800, 0xDFFF)))  # a lone surrogate: surrogatepass
            else:
                lo, hi = r.choice(pools)
                out.append(chr(r.randint(lo, hi)))
        return "".join(out)

    def scalar(self, hashable=True):
        r = self.r
        k = r.randrange(10)
        if k == 0:
            return r.choice([None, True, False])
        if k in (1, 2):
            return self.int_()
        if k == 3:
            return self.float_()
        if k in (4, 5, 6):
            return self.bytes_()
        return self.str_()

    def key(self, depth):
        # Dict keys and set items: anything hashable, tuples and frozensets included.
        r = self.r
        if depth < 4 and r.random() < 0.1:
            return tuple(self.key(depth + 1) for _ in range(r.randint(0, 3)))
        if depth < 4 and r.random() < 0.05:
            return frozenset(self.key(depth + 1) for _ in range(r.randint(0, 3)))
        return self.scalar()

    def value(self, depth, budget):
        r = self.r
        budget[0] -= 1
        if depth >= 6 or budget[0] <= 0 or r.random() < 0.45:
            return self.scalar()
        n = r.choice([0, 1, 2, 3, 4, 6, 9])
        k = r.randrange(6)
        if k == 0:
            return tuple(self.value(depth + 1, budget) for _ in range(n))
        if k == 1:
            return [self.value(depth + 1, budget) for _ in range(n)]
        if k in (2, 3):
            return {self.key(depth + 1): self.value(depth + 1, budget) for _ in range(n)}
        if k == 4:
            return {self.key(depth + 1) for _ in range(n)}
        return frozenset(self.key(depth + 1) for _ in range(n))

    def deep(self):
        # A chain of containers up to the depth limit, mixing every container kind.
        r = self.r
        depth = r.randint(MAX_DEPTH - 8, MAX_DEPTH)
        v = self.scalar()
        for _ in range(depth):
            k = r.randrange(4)
            if k == 0:
                v = (v,)
            elif k == 1:
                v = [v, self.scalar()]
            elif k == 2:
                v = {self.scalar(): v}
            else:
                try:
                    v = frozenset([v])
                except TypeError:  # v holds a list or dict: not hashable
                    v = (v,)
        return v

    def top(self):
        r = self.r
        if r.random() < 0.03:
            return self.deep()
        if r.random() < 0.15:
            return self.scalar()
        return self.value(0, [r.randint(5, 60)])


def main():
    mode = sys.argv[1]
    out = sys.stdout
    if mode == "gen":
        g = Gen(int(sys.argv[2]))
        for _ in range(int(sys.argv[3])):
            v = g.top()
            out.write(line(v, marshal.dumps(v, 2)) + "\n")
    elif mode == "check":
        for text in sys.stdin:
            data = bytes.fromhex(text.strip())
            try:
                v = marshal.loads(data)
            except Exception as e:  # reported to the Rust side, which fails the test
                out.write(json.dumps({"error": repr(e)}) + "\n")
                continue
            out.write(line(v, marshal.dumps(v, 2)) + "\n")
    else:
        raise SystemExit("mode must be gen or check")


main()
