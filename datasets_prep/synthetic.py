"""Offline data that no one has to download: GSM8K-style word problems and short posts to summarise.

``synthetic_gsm8k(n, seed, difficulty)`` writes grade-school word problems from our own templates
in GSM8K's exact raw format: ``question`` and a step-by-step ``answer`` whose every calculation
carries a GSM8K calculator annotation (``3*12 = <<3*12=36>>36``) and that ends in ``#### <int>``.
A problem is a chain of 1 to 4 calculations on a running quantity (items collected, money left,
distance travelled, ages, pages read), each chain link told by one of several sentence
templates with names, objects and numbers drawn at random; divisions are only ever drawn where
they come out exact, and no quantity goes negative, so every answer is an exact integer.

``synthetic_tldr(n, seed)`` writes short first-person posts in smoltldr's raw schema
(``prompt`` = the post, ``completion`` = a one-sentence summary built from the same facts).

Both are deterministic for a seed (``n`` rows from one ``random.Random(seed)``; a longer list
starts with the shorter one) and return ``list[dict]`` in the raw schema, ready for
``load_gsm8k(source=...)`` / ``load_smoltldr(source=...)``. Pure Python, no downloads.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

# --------------------------------------------------------------------------- vocabulary

NAMES = [  # (name, subject pronoun, possessive)
    ("Natalia", "she", "her"),
    ("Weng", "he", "his"),
    ("Betty", "she", "her"),
    ("Julie", "she", "her"),
    ("James", "he", "his"),
    ("Albert", "he", "his"),
    ("Mark", "he", "his"),
    ("Ken", "he", "his"),
    ("Alexis", "she", "her"),
    ("Tina", "she", "her"),
    ("Randy", "he", "his"),
    ("Joy", "she", "her"),
    ("Amara", "she", "her"),
    ("Diego", "he", "his"),
    ("Priya", "she", "her"),
    ("Kofi", "he", "his"),
    ("Mei", "she", "her"),
    ("Omar", "he", "his"),
    ("Sofia", "she", "her"),
    ("Liam", "he", "his"),
    ("Yuki", "she", "her"),
    ("Mateo", "he", "his"),
    ("Zainab", "she", "her"),
    ("Noah", "he", "his"),
    ("Ingrid", "she", "her"),
    ("Tariq", "he", "his"),
    ("Chloe", "she", "her"),
    ("Ravi", "he", "his"),
    ("Elena", "she", "her"),
    ("Hugo", "he", "his"),
    ("Aisha", "she", "her"),
    ("Felix", "he", "his"),
    ("Nadia", "she", "her"),
    ("Samuel", "he", "his"),
    ("Lucia", "she", "her"),
    ("Jamal", "he", "his"),
    ("Grace", "she", "her"),
    ("Pedro", "he", "his"),
    ("Hana", "she", "her"),
    ("Oscar", "he", "his"),
    ("Fatima", "she", "her"),
    ("Ethan", "he", "his"),
    ("Leila", "she", "her"),
    ("Marcus", "he", "his"),
    ("Rosa", "she", "her"),
    ("Viktor", "he", "his"),
    ("Maya", "she", "her"),
    ("Tomas", "he", "his"),
]

ITEMS = [  # (plural, container that holds several)
    ("apples", "bag"),
    ("marbles", "jar"),
    ("stickers", "sheet"),
    ("cookies", "box"),
    ("pencils", "pack"),
    ("seashells", "bucket"),
    ("trading cards", "pack"),
    ("eggs", "carton"),
    ("cupcakes", "tray"),
    ("books", "box"),
    ("flowers", "bouquet"),
    ("toy cars", "set"),
    ("beads", "bag"),
    ("stamps", "album page"),
    ("balloons", "pack"),
    ("oranges", "crate"),
    ("potatoes", "sack"),
    ("candles", "box"),
    ("crayons", "box"),
    ("buttons", "tin"),
    ("comic books", "stack"),
    ("lemons", "bag"),
    ("muffins", "tray"),
    ("notebooks", "pack"),
    ("rocks", "bucket"),
    ("tomatoes", "basket"),
    ("strawberries", "basket"),
    ("postcards", "set"),
    ("paper cranes", "string"),
    ("golf balls", "bucket"),
    ("bottle caps", "jar"),
    ("chocolates", "box"),
]

GAIN_VERBS = ["buys", "finds", "is given", "picks up", "wins", "collects", "gets"]
LOSE_VERBS = [
    ("gives", "to {friend}"),
    ("sells", "at a yard sale"),
    ("loses", "on the way home"),
    ("trades away", "with {friend}"),
    ("donates", "to the school"),
    ("uses", "for a project"),
]
GOODS = [
    ("notebooks", 2, 6),
    ("sandwiches", 4, 9),
    ("movie tickets", 8, 15),
    ("T-shirts", 9, 25),
    ("plants", 5, 18),
    ("board games", 12, 40),
    ("pizzas", 8, 16),
    ("comic books", 3, 10),
    ("water bottles", 3, 12),
    ("bracelets", 4, 14),
    ("puzzles", 6, 20),
    ("scarves", 7, 22),
    ("kites", 5, 16),
    ("tennis balls", 2, 5),
    ("mugs", 4, 11),
    ("candles", 3, 9),
]
PLACES = [
    "the store",
    "the market",
    "the bakery",
    "the mall",
    "the fair",
    "the bookstore",
    "the garden center",
]
THINGS = ["lunch", "a gift", "bus fare", "snacks", "a new hat", "a movie", "art supplies", "a phone case"]
JOBS = [
    ("mowing lawns", 8, 20),
    ("babysitting", 9, 18),
    ("washing cars", 6, 15),
    ("walking dogs", 7, 16),
    ("tutoring", 12, 30),
    ("delivering newspapers", 5, 12),
    ("helping at a cafe", 10, 17),
]
MOVES = [
    ("drives", 30, 70),
    ("cycles", 8, 20),
    ("walks", 2, 5),
    ("jogs", 4, 8),
    ("rides a train", 50, 120),
    ("rides a scooter", 10, 25),
]
TASKS = [  # (verb, unit, the whole it belongs to)
    ("reads", "pages", "book"),
    ("knits", "rows", "scarf"),
    ("types", "words", "essay"),
    ("plants", "seedlings", "garden"),
    ("paints", "tiles", "mural"),
    ("folds", "paper cranes", "display"),
    ("bakes", "cookies", "school order"),
    ("solves", "puzzles", "puzzle book"),
]
TIMES = [
    "The next day",
    "Later",
    "Then",
    "After lunch",
    "On Saturday",
    "The following week",
    "In the evening",
]

DIFFICULTIES = {"easy": (1, 2), "medium": (2, 3), "hard": (3, 4), "mixed": (1, 4)}
_SCALE = {"easy": 1, "medium": 2, "hard": 4, "mixed": 2}


# --------------------------------------------------------------------------- building blocks


@dataclass
class _Calc:
    """One solution line: ``{lead}{expr} = <<{expr}={value}>>{value}{tail}``."""

    lead: str
    expr: str
    value: int
    tail: str

    def line(self) -> str:
        return f"{self.lead}{self.expr} = <<{self.expr}={self.value}>>{self.value}{self.tail}"


@dataclass
class _State:
    rng: random.Random
    scale: int
    q: int = 0
    story: list[str] = field(default_factory=list)
    calcs: list[_Calc] = field(default_factory=list)
    ctx: dict = field(default_factory=dict)
    question: str = ""


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _times_word(k: int) -> str:
    return {2: "twice", 3: "three times"}.get(k, f"{k} times")


def _hours(h: int) -> str:
    return "1 hour" if h == 1 else f"{h} hours"


def _divisors(q: int, low: int = 2, high: int = 12) -> list[int]:
    return [k for k in range(low, high + 1) if q % k == 0 and q // k > 0]


def _person(rng: random.Random, exclude: tuple[str, ...] = ()) -> tuple[str, str, str]:
    while True:
        person = rng.choice(NAMES)
        if person[0] not in exclude:
            return person


def _when(s: _State) -> str:
    """A time marker not used yet in this problem ("Later", "On Saturday", ...)."""
    used = s.ctx.setdefault("times", [])
    fresh = [t for t in TIMES if t not in used] or TIMES
    when = s.rng.choice(fresh)
    used.append(when)
    return when


# An op: (state, is_final) -> True if it applied (appending story and calcs), False if it does not fit.
_Op = Callable[[_State, bool], bool]


# --------------------------------------------------------------------------- family: collections


def _items_start(s: _State) -> None:
    name, pron, poss = _person(s.rng)
    items, container = s.rng.choice(ITEMS)
    friend = _person(s.rng, exclude=(name,))[0]
    s.q = s.rng.randint(3, 20 * s.scale)
    s.ctx.update(name=name, pron=pron, poss=poss, items=items, container=container, friend=friend)
    s.story.append(
        s.rng.choice(
            [
                f"{name} has {s.q} {items}.",
                f"{name} starts the day with {s.q} {items}.",
                f"There are {s.q} {items} in {name}'s room.",
            ]
        )
    )
    s.question = s.rng.choice(
        [
            f"How many {items} does {name} have now?",
            f"How many {items} does {name} end up with?",
            f"How many {items} does {name} have in the end?",
        ]
    )


def _items_gain(s: _State, final: bool) -> bool:
    c = s.ctx
    b = s.rng.randint(2, 15 * s.scale)
    verb = s.rng.choice(GAIN_VERBS)
    s.story.append(f"{_when(s)} {c['pron']} {verb} {b} more {c['items']}.")
    value = s.q + b
    s.calcs.append(_Calc(f"{c['name']} then has ", f"{s.q}+{b}", value, f" {c['items']}."))
    s.q = value
    return True


def _items_lose(s: _State, final: bool) -> bool:
    c = s.ctx
    if s.q < 3:
        return False
    b = s.rng.randint(1, s.q - 1)
    verb, where = s.rng.choice(LOSE_VERBS)
    s.story.append(f"{_cap(c['pron'])} {verb} {b} of them {where.format(friend=c['friend'])}.")
    value = s.q - b
    s.calcs.append(_Calc(f"{c['name']} has ", f"{s.q}-{b}", value, f" {c['items']} left."))
    s.q = value
    return True


def _items_times(s: _State, final: bool) -> bool:
    c = s.ctx
    k = s.rng.choice([2, 2, 3, 4, 5])
    if s.q * k > 400 * s.scale:
        return False
    s.story.append(f"By the end of the month {c['pron']} has {_times_word(k)} as many {c['items']} as that.")
    value = s.q * k
    s.calcs.append(_Calc(f"{c['name']} has ", f"{s.q}*{k}", value, f" {c['items']} at the end of the month."))
    s.q = value
    return True


def _items_containers(s: _State, final: bool) -> bool:  # two calculations
    c = s.ctx
    k, b = s.rng.randint(2, 6 + s.scale), s.rng.randint(3, 8 + 4 * s.scale)
    s.story.append(
        f"{_cap(c['pron'])} {s.rng.choice(['buys', 'receives', 'brings home'])} {k} "
        f"{c['container']}s of {c['items']} with {b} {c['items']} in each {c['container']}."
    )
    added = k * b
    s.calcs.append(_Calc(f"The {c['container']}s hold ", f"{k}*{b}", added, f" {c['items']}."))
    value = s.q + added
    s.calcs.append(_Calc(f"{c['name']} has ", f"{s.q}+{added}", value, f" {c['items']} in all."))
    s.q = value
    return True


def _items_fraction(s: _State, final: bool) -> bool:  # two calculations
    c = s.ctx
    ks = [k for k in _divisors(s.q, 2, 5)]
    if not ks:
        return False
    k = s.rng.choice(ks)
    part = {2: "half", 3: "a third", 4: "a quarter", 5: "a fifth"}[k]
    s.story.append(f"{_cap(c['pron'])} gives {part} of {c['poss']} {c['items']} to {c['friend']}.")
    given = s.q // k
    s.calcs.append(_Calc(f"{c['name']} gives away ", f"{s.q}/{k}", given, f" {c['items']}."))
    value = s.q - given
    s.calcs.append(_Calc(f"{c['name']} keeps ", f"{s.q}-{given}", value, f" {c['items']}."))
    s.q = value
    return True


def _items_share(s: _State, final: bool) -> bool:  # final only: changes what is asked
    c = s.ctx
    ks = _divisors(s.q, 2, 10)
    if not final or not ks:
        return False
    k = s.rng.choice(ks)
    group = s.rng.choice(
        [
            ("friends", "friend"),
            ("classmates", "classmate"),
            ("cousins", "cousin"),
            ("boxes", "box"),
            ("neighbors", "neighbor"),
        ]
    )
    s.story.append(f"{_cap(c['pron'])} shares all of them equally among {k} {group[0]}.")
    s.question = f"How many {c['items']} does each {group[1]} get?"
    value = s.q // k
    s.calcs.append(_Calc(f"Each {group[1]} gets ", f"{s.q}/{k}", value, f" {c['items']}."))
    s.q = value
    return True


# --------------------------------------------------------------------------- family: money


def _money_start(s: _State) -> None:
    name, pron, poss = _person(s.rng)
    s.ctx.update(name=name, pron=pron, poss=poss, place=s.rng.choice(PLACES))
    s.q = 0  # the starting amount is chosen at the end, once we know how much is spent
    s.question = s.rng.choice(
        [
            f"How much money does {name} have now?",
            f"How many dollars does {name} have now?",
            f"How much money, in dollars, does {name} have at the end?",
        ]
    )


def _money_buy(s: _State, final: bool) -> bool:  # two calculations
    c = s.ctx
    goods, low, high = s.rng.choice(GOODS)
    k, p = s.rng.randint(2, 3 + s.scale), s.rng.randint(low, high)
    s.story.append(f"At {c['place']} {c['pron']} buys {k} {goods} that cost ${p} each.")
    cost = k * p
    s.calcs.append(_Calc(f"The {goods} cost ", f"{k}*{p}", cost, " dollars."))
    s.ctx.setdefault("deltas", []).append(-cost)
    s.calcs.append(_Calc(f"{c['name']} has ", "{q}-" + str(cost), -cost, " dollars left."))
    return True


def _money_spend(s: _State, final: bool) -> bool:
    c = s.ctx
    b = s.rng.randint(3, 12 * s.scale)
    s.story.append(f"{_cap(c['pron'])} spends ${b} on {s.rng.choice(THINGS)}.")
    s.ctx.setdefault("deltas", []).append(-b)
    s.calcs.append(_Calc(f"{c['name']} has ", "{q}-" + str(b), -b, " dollars left."))
    return True


def _money_gift(s: _State, final: bool) -> bool:
    c = s.ctx
    b = s.rng.randint(5, 15 * s.scale)
    giver = s.rng.choice(["grandmother", "aunt", "uncle", "older brother", "neighbor", "grandfather"])
    obj = "her" if c["pron"] == "she" else "him"
    s.story.append(f"{_cap(c['poss'])} {giver} gives {obj} ${b}.")
    s.ctx.setdefault("deltas", []).append(b)
    s.calcs.append(_Calc(f"{c['name']} then has ", "{q}+" + str(b), b, " dollars."))
    return True


def _money_job(s: _State, final: bool) -> bool:  # two calculations
    c = s.ctx
    job, low, high = s.rng.choice(JOBS)
    h, w = s.rng.randint(2, 4 + s.scale), s.rng.randint(low, high)
    s.story.append(f"{_cap(c['pron'])} earns ${w} an hour {job} and works {h} hours.")
    pay = h * w
    s.calcs.append(_Calc(f"{_cap(c['pron'])} earns ", f"{h}*{w}", pay, f" dollars {job}."))
    s.ctx.setdefault("deltas", []).append(pay)
    s.calcs.append(_Calc(f"{c['name']} then has ", "{q}+" + str(pay), pay, " dollars."))
    return True


def _money_finish(s: _State) -> None:
    """Pick a starting amount that keeps every balance >= 0, then fill in the running totals."""
    deltas = s.ctx.get("deltas", [])
    balance, lowest = 0, 0
    for delta in deltas:
        balance += delta
        lowest = min(lowest, balance)
    start = -lowest + s.rng.randint(0, 20 * s.scale)
    if start == 0:
        start = s.rng.randint(5, 20)
    s.story.insert(
        0,
        s.rng.choice(
            [
                f"{s.ctx['name']} has ${start}.",
                f"{s.ctx['name']} saved ${start}.",
                f"{s.ctx['name']} has ${start} in {s.ctx['poss']} wallet.",
            ]
        ),
    )
    q = start
    for calc in s.calcs:
        if "{q}" in calc.expr:
            delta = calc.value
            calc.expr = calc.expr.format(q=q)
            q += delta
            calc.value = q
    s.q = q


# --------------------------------------------------------------------------- family: travel


def _travel_start(s: _State) -> None:
    name, pron, poss = _person(s.rng)
    move, low, high = s.rng.choice(MOVES)
    speed, hours = s.rng.randint(low, high), s.rng.randint(1, 2 + s.scale)
    s.ctx.update(name=name, pron=pron, poss=poss, move=move, low=low, high=high)
    s.story.append(f"{name} {move} at {speed} miles per hour for {_hours(hours)}.")
    s.q = speed * hours
    s.calcs.append(_Calc(f"{_cap(pron)} covers ", f"{speed}*{hours}", s.q, " miles."))
    s.question = s.rng.choice(
        [f"How many miles does {name} travel in total?", f"How far, in miles, does {name} go altogether?"]
    )


def _travel_leg(s: _State, final: bool) -> bool:  # two calculations
    c = s.ctx
    speed, hours = s.rng.randint(c["low"], c["high"]), s.rng.randint(1, 2 + s.scale)
    s.story.append(
        f"{_when(s)} {c['pron']} {c['move'].split()[0]} at {speed} miles per hour "
        f"for another {_hours(hours)}."
    )
    leg = speed * hours
    s.calcs.append(_Calc("The second stretch is ", f"{speed}*{hours}", leg, " miles."))
    value = s.q + leg
    s.calcs.append(_Calc("Together that is ", f"{s.q}+{leg}", value, " miles."))
    s.q = value
    return True


def _travel_detour(s: _State, final: bool) -> bool:
    c = s.ctx
    d = s.rng.randint(2, 10 * s.scale)
    s.story.append(f"{_cap(c['pron'])} also makes a detour of {d} miles.")
    value = s.q + d
    s.calcs.append(_Calc("With the detour that is ", f"{s.q}+{d}", value, " miles."))
    s.q = value
    return True


def _travel_back(s: _State, final: bool) -> bool:
    c = s.ctx
    if c.get("returned"):
        return False
    c["returned"] = True
    s.story.append(f"Then {c['pron']} comes back home the same way.")
    value = s.q * 2
    s.calcs.append(_Calc("There and back is ", f"{s.q}*2", value, " miles."))
    s.q = value
    return True


# --------------------------------------------------------------------------- family: ages


def _ages_start(s: _State) -> None:
    name, _, _ = _person(s.rng)
    s.q = s.rng.randint(4, 12 + 2 * s.scale)
    s.ctx.update(last=name, used=(name,))
    s.story.append(f"{name} is {s.q} years old.")
    s.question = f"How old is {name}?"


def _ages_next(s: _State) -> str:
    name = _person(s.rng, exclude=s.ctx["used"])[0]
    s.ctx["used"] = (*s.ctx["used"], name)
    return name


def _ages_older(s: _State, final: bool) -> bool:
    d = s.rng.randint(2, 25)
    if s.q + d > 95:
        return False
    prev, name = s.ctx["last"], _ages_next(s)
    s.story.append(f"{name} is {d} years older than {prev}.")
    value = s.q + d
    s.calcs.append(_Calc(f"{name} is ", f"{s.q}+{d}", value, " years old."))
    s.q, s.ctx["last"] = value, name
    s.question = f"How old is {name}?"
    return True


def _ages_younger(s: _State, final: bool) -> bool:
    if s.q < 6:
        return False
    d = s.rng.randint(1, min(s.q - 2, 20))
    prev, name = s.ctx["last"], _ages_next(s)
    s.story.append(f"{name} is {d} years younger than {prev}.")
    value = s.q - d
    s.calcs.append(_Calc(f"{name} is ", f"{s.q}-{d}", value, " years old."))
    s.q, s.ctx["last"] = value, name
    s.question = f"How old is {name}?"
    return True


def _ages_times(s: _State, final: bool) -> bool:
    ks = [k for k in (2, 3, 4) if s.q * k <= 90]
    if not ks:
        return False
    k = s.rng.choice(ks)
    prev, name = s.ctx["last"], _ages_next(s)
    s.story.append(f"{name} is {_times_word(k)} as old as {prev}.")
    value = s.q * k
    s.calcs.append(_Calc(f"{name} is ", f"{s.q}*{k}", value, " years old."))
    s.q, s.ctx["last"] = value, name
    s.question = f"How old is {name}?"
    return True


def _ages_half(s: _State, final: bool) -> bool:
    if s.q % 2 or s.q < 8:
        return False
    prev, name = s.ctx["last"], _ages_next(s)
    s.story.append(f"{name} is half as old as {prev}.")
    value = s.q // 2
    s.calcs.append(_Calc(f"{name} is ", f"{s.q}/2", value, " years old."))
    s.q, s.ctx["last"] = value, name
    s.question = f"How old is {name}?"
    return True


def _ages_future(s: _State, final: bool) -> bool:  # final only: asks about the future
    if not final:
        return False
    y = s.rng.randint(2, 15)
    name = s.ctx["last"]
    s.question = f"How old will {name} be in {y} years?"
    value = s.q + y
    s.calcs.append(_Calc(f"In {y} years {name} will be ", f"{s.q}+{y}", value, " years old."))
    s.q = value
    return True


# --------------------------------------------------------------------------- family: work rate


def _task_start(s: _State) -> None:
    name, pron, poss = _person(s.rng)
    verb, unit, whole = s.rng.choice(TASKS)
    rate, days = s.rng.randint(3, 10 * s.scale), s.rng.randint(2, 7)
    s.ctx.update(name=name, pron=pron, poss=poss, verb=verb, unit=unit, whole=whole, rate=rate)
    s.story.append(f"{name} {verb} {rate} {unit} every day for {days} days.")
    s.q = rate * days
    s.calcs.append(_Calc(f"In {days} days {pron} {verb} ", f"{rate}*{days}", s.q, f" {unit}."))
    s.question = f"How many {unit} does {name} {verb.removesuffix('s')} in total?"


def _task_extra(s: _State, final: bool) -> bool:
    c = s.ctx
    e = s.rng.randint(2, 6 * s.scale)
    s.story.append(f"On the last day {c['pron']} {c['verb']} {e} extra {c['unit']}.")
    value = s.q + e
    s.calcs.append(_Calc("With the extra ones that is ", f"{s.q}+{e}", value, f" {c['unit']}."))
    s.q = value
    return True


def _task_bonus(s: _State, final: bool) -> bool:
    c = s.ctx
    e = s.rng.randint(2, 6 * s.scale)
    s.story.append(
        f"Before the first day {c['pron']} had already finished {e} {c['unit']} for the {c['whole']}."
    )
    value = s.q + e
    s.calcs.append(_Calc("Counting the ones from before, that is ", f"{s.q}+{e}", value, f" {c['unit']}."))
    s.q = value
    return True


def _task_weekend(s: _State, final: bool) -> bool:  # two calculations
    c = s.ctx
    k = s.rng.choice([2, 3])
    day = s.rng.choice(["Saturday", "Sunday", "the holiday"])
    s.story.append(f"On {day} {c['pron']} {c['verb']} {_times_word(k)} the daily amount.")
    daily = c["rate"] * k
    s.calcs.append(_Calc(f"On {day} {c['pron']} {c['verb']} ", f"{c['rate']}*{k}", daily, f" {c['unit']}."))
    value = s.q + daily
    s.calcs.append(_Calc("In total that is ", f"{s.q}+{daily}", value, f" {c['unit']}."))
    s.q = value
    return True


def _task_left(s: _State, final: bool) -> bool:  # final only: how much of the whole is left
    if not final:
        return False
    c = s.ctx
    total = s.q + s.rng.randint(5, 40 * s.scale)
    s.story.append(f"The {c['whole']} needs {total} {c['unit']} in all.")
    s.question = f"How many more {c['unit']} does {c['name']} still need to finish the {c['whole']}?"
    value = total - s.q
    s.calcs.append(_Calc(f"{_cap(c['pron'])} still needs ", f"{total}-{s.q}", value, f" {c['unit']}."))
    s.q = value
    return True


# --------------------------------------------------------------------------- the generator

# family: (start, start_calcs, [(op, cost)], finish)
_FAMILIES = {
    "items": (
        _items_start,
        0,
        [
            (_items_gain, 1),
            (_items_lose, 1),
            (_items_times, 1),
            (_items_containers, 2),
            (_items_fraction, 2),
            (_items_share, 1),
        ],
        None,
    ),
    "money": (
        _money_start,
        0,
        [(_money_spend, 1), (_money_gift, 1), (_money_buy, 2), (_money_job, 2)],
        _money_finish,
    ),
    "travel": (_travel_start, 1, [(_travel_detour, 1), (_travel_back, 1), (_travel_leg, 2)], None),
    "ages": (
        _ages_start,
        0,
        [(_ages_older, 1), (_ages_younger, 1), (_ages_times, 1), (_ages_half, 1), (_ages_future, 1)],
        None,
    ),
    "work": (_task_start, 1, [(_task_extra, 1), (_task_bonus, 1), (_task_weekend, 2), (_task_left, 1)], None),
}


def _one_problem(rng: random.Random, steps: int, scale: int) -> dict[str, str]:
    family = rng.choice(sorted(_FAMILIES))
    start, start_calcs, ops, finish = _FAMILIES[family]
    s = _State(rng=rng, scale=scale)
    start(s)
    remaining = steps - start_calcs
    used: set = set()
    attempts = 0
    while remaining > 0:
        attempts += 1
        if attempts > 200:  # a dead end (e.g. quantity too small for every op): start over
            return _one_problem(rng, steps, scale)
        fitting = [(op, cost) for op, cost in ops if cost <= remaining]
        # Prefer a kind of step this problem has not told yet; repeat one only when nothing else fits.
        fresh = [(op, cost) for op, cost in fitting if op not in used]
        op, cost = rng.choice(fresh if fresh and attempts < 50 else fitting)
        if op(s, remaining - cost == 0):
            remaining -= cost
            used.add(op)
    if finish is not None:
        finish(s)
    question = " ".join(s.story + [s.question])
    answer = "\n".join([calc.line() for calc in s.calcs] + [f"#### {s.q}"])
    return {"question": question, "answer": answer}


def _steps_range(difficulty) -> tuple[int, int]:
    if isinstance(difficulty, bool) or not isinstance(difficulty, (int, str)):
        raise TypeError(
            f"difficulty must be one of {sorted(DIFFICULTIES)} or a step count 1-4; got {difficulty!r}."
        )
    if isinstance(difficulty, int):
        if not 1 <= difficulty <= 4:
            raise ValueError(f"difficulty as a step count must be 1 to 4; got {difficulty}.")
        return difficulty, difficulty
    if difficulty not in DIFFICULTIES:
        raise ValueError(
            f"difficulty must be one of {sorted(DIFFICULTIES)} or a step count 1-4; got {difficulty!r}."
        )
    return DIFFICULTIES[difficulty]


def synthetic_gsm8k(n: int, seed: int = 0, difficulty: str | int = "mixed") -> list[dict[str, str]]:
    """``n`` GSM8K-format word problems (raw schema: ``question``, ``answer`` ending in ``#### <int>``).

    ``difficulty``: ``"easy"`` (1-2 calculations, small numbers), ``"medium"`` (2-3), ``"hard"``
    (3-4, larger numbers), ``"mixed"`` (1-4, the default), or an exact step count 1-4.
    Deterministic for ``seed``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative integer; got {n!r}.")
    low, high = _steps_range(difficulty)
    scale = _SCALE[difficulty] if isinstance(difficulty, str) else difficulty
    rng = random.Random(seed)
    return [_one_problem(rng, rng.randint(low, high), scale) for _ in range(n)]


# --------------------------------------------------------------------------- synthetic TL;DR

_SUBJECTS = [  # (topic, problem, detail sentences, what the poster asks)
    (
        "roommate",
        "my roommate keeps eating my food",
        [
            "I label everything and even bought a mini fridge for my room.",
            "When I bring it up, {pron2} laughs it off.",
            "Last night my leftovers for lunch were gone again.",
        ],
        "how do I bring it up without ruining the friendship",
    ),
    (
        "job",
        "my manager wants me to work every weekend",
        [
            "I was hired for weekdays only and it says so in my contract.",
            "Two coworkers quit last month.",
            "I have not had a full day off in {n} weeks.",
        ],
        "should I push back or start looking for a new job",
    ),
    (
        "dog",
        "my dog barks at every delivery person",
        [
            "We adopted {pron2} {n} months ago from a shelter.",
            "Treats work for a minute and then the barking starts again.",
            "The neighbors have started to complain.",
        ],
        "what training actually worked for you",
    ),
    (
        "apartment",
        "my landlord has not fixed the heating",
        [
            "It has been {n} days and the apartment is freezing.",
            "I sent three emails and left two voicemails.",
            "I am using a space heater that doubles my power bill.",
        ],
        "what are my options as a tenant",
    ),
    (
        "exam",
        "I failed my first university exam",
        [
            "I studied for {n} days but panicked when I saw the questions.",
            "Everyone else in my group passed.",
            "The retake is next month.",
        ],
        "how do I deal with exam anxiety",
    ),
    (
        "sister",
        "my sister borrowed money and stopped answering",
        [
            "She asked for ${n}0 to cover rent and promised to pay it back in a week.",
            "That was two months ago.",
            "Our parents say I should let it go.",
        ],
        "am I wrong to ask for it back",
    ),
    (
        "garden",
        "my tomato plants are dying",
        [
            "The leaves turned yellow and then brown within {n} days.",
            "I water them every morning.",
            "The plants next to them look perfectly healthy.",
        ],
        "what am I doing wrong",
    ),
    (
        "car",
        "my car makes a grinding noise when I brake",
        [
            "It started {n} days ago and gets louder every day.",
            "The mechanic quoted more than I can afford right now.",
            "I drive an hour to work each way.",
        ],
        "is it safe to keep driving until payday",
    ),
    (
        "friend",
        "my best friend forgot my birthday",
        [
            "We have been friends for {n} years.",
            "She posted photos from a party that same night.",
            "I have not said anything yet.",
        ],
        "should I tell her it hurt",
    ),
    (
        "running",
        "I want to run my first 10k",
        [
            "Right now I can run about {n} kilometers without stopping.",
            "The race is in two months.",
            "My knees hurt a little after long runs.",
        ],
        "how should I train without getting injured",
    ),
    (
        "cooking",
        "my bread never rises",
        [
            "I have tried {n} different recipes.",
            "The yeast is new and I check the water temperature.",
            "The loaves come out dense and flat every time.",
        ],
        "what could be going wrong",
    ),
    (
        "neighbor",
        "my upstairs neighbor plays loud music at night",
        [
            "It usually starts around midnight and goes on for {n} hours.",
            "I left a polite note last week.",
            "I have to wake up at six for work.",
        ],
        "what should I do next",
    ),
    (
        "coworker",
        "a coworker takes credit for my work",
        [
            "In the last meeting {pron2} presented my slides as {pron2} own.",
            "This has happened {n} times now.",
            "My manager seems to believe {pron2}.",
        ],
        "how do I handle this professionally",
    ),
    (
        "cat",
        "my cat stopped using the litter box",
        [
            "Nothing changed at home as far as I know.",
            "The vet visit {n} days ago found nothing wrong.",
            "It only happens in the hallway.",
        ],
        "has anyone fixed this",
    ),
    (
        "money",
        "I keep overspending on takeout",
        [
            "I spent about ${n}00 on delivery last month.",
            "I cook on Sundays but never eat the leftovers.",
            "My savings have not grown in a year.",
        ],
        "how do I break the habit",
    ),
    (
        "moving",
        "I am moving to a new city alone",
        [
            "I start the new job in {n} weeks.",
            "I do not know anyone there.",
            "My family thinks it is a mistake.",
        ],
        "how did you make friends after moving",
    ),
    (
        "wedding",
        "my brother did not invite my partner to his wedding",
        [
            "We have been together for {n} years.",
            "Every other sibling got a plus one.",
            "My brother says it is about the budget.",
        ],
        "should I still go",
    ),
    (
        "laptop",
        "my laptop became very slow",
        [
            "It is only {n} years old.",
            "Startup takes several minutes.",
            "I already uninstalled the programs I never use.",
        ],
        "is it worth repairing or should I buy a new one",
    ),
    (
        "sleep",
        "I cannot fall asleep before 3 am",
        [
            "I have to be up at seven for class.",
            "I tried melatonin for {n} nights.",
            "I drink coffee only in the morning.",
        ],
        "what helped you fix your sleep schedule",
    ),
    (
        "class",
        "my group project partners do nothing",
        [
            "The project is due in {n} days.",
            "I wrote most of the report myself.",
            "They reply to messages once a week.",
        ],
        "should I tell the professor",
    ),
]
_AGES = list(range(17, 46))
_OPENERS = [
    "Throwaway because people I know use this site.",
    "Long time lurker, first post.",
    "Sorry for formatting, I am on mobile.",
    "Not sure if this is the right place to ask.",
    "",
]


def synthetic_tldr(n: int, seed: int = 0) -> list[dict[str, str]]:
    """``n`` short first-person posts to summarise, in smoltldr's raw schema (``prompt``, ``completion``).

    ``prompt`` is the post as plain text (the course's standard format); ``completion`` is a
    one-sentence TL;DR written from the same facts. Deterministic for ``seed``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative integer; got {n!r}.")
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        _topic, problem, details, ask = rng.choice(_SUBJECTS)
        age, gender = rng.choice(_AGES), rng.choice(["F", "M"])
        number = rng.randint(2, 9)
        chosen = rng.sample(details, k=rng.randint(2, len(details)))
        pron2 = rng.choice(["him", "her"])
        body = " ".join(sentence.format(n=number, pron2=pron2) for sentence in chosen)
        opener = rng.choice(_OPENERS)
        headline = rng.choice(
            [
                f"So basically {problem}.",
                f"I ({age}{gender}) have a problem: {problem}.",
                f"Need advice: {problem}.",
            ]
        )
        closing = rng.choice([f"Any advice on {ask}?", f"So {ask}?", f"Honestly, {ask}?"])
        prompt = " ".join(part for part in (opener, headline, body, closing) if part)
        fact = chosen[0].format(n=number, pron2=pron2).rstrip(".")
        completion = rng.choice(
            [
                f"{_cap(problem)}; {ask}?",
                f"{_cap(problem)} and I need advice on {ask}.",
                f"{_cap(problem)}, {ask}?",
                f"{_cap(problem)} ({fact[:1].lower() + fact[1:]}).",
            ]
        )
        rows.append({"prompt": prompt, "completion": completion})
    return rows
