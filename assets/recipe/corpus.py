"""A tiny synthetic story language, generated deterministically from a seed.

What it teaches: a corpus can be *designed* so that a 1M-parameter model
learns behaviours you can then see in its attention maps.

  * Stories where two characters, an object and a place recur: a later
    mention ("Then Ben gave the kite back to") must look back to an earlier
    one (the owner, "Lily had a red kite"). The final sentence of each story
    family is a *templated completion*: its answer is a name mentioned earlier.
  * Repeated sequences of made-up words ("Tom wrote a secret list: zup kel
    mo. Mia read it again: zup kel mo."): the only way to predict the second
    copy is to find the first one and copy the token after it, which is what
    an induction head does (Olsson et al. 2022, "In-context Learning and
    Induction Heads").

What it leaves out: real English, long-range plots, dialogue trees. Every
story is one line of ASCII; nothing is downloaded or copied from elsewhere.

Usage (standalone): /usr/bin/python3 corpus.py --seed 1 --stories 10 prints stories.
"""

import argparse
import random

NAMES = [
    "Lily", "Tom", "Mia", "Ben", "Anna", "Sam", "Zoe", "Max", "Emma", "Leo", "Ruby", "Jack",
    "Nora", "Finn", "Ella", "Owen", "Lucy", "Theo", "Rosa", "Kai", "Ivy", "Hugo", "Jade", "Milo",
]
OBJECTS = [
    "ball", "kite", "book", "hat", "drum", "boat", "cup", "lamp", "shell", "bell", "key", "map",
    "box", "doll", "flute", "sock", "coin", "rope", "brush", "spoon", "clock", "flag", "star",
    "leaf",
]
PLACES = [
    "park", "beach", "forest", "garden", "school", "market", "river", "farm", "castle",
    "library", "zoo", "lake", "hill", "bakery", "village", "cave",
]
ADJECTIVES = ["red", "blue", "green", "big", "small", "shiny", "old", "new", "soft", "yellow"]
ANIMALS = ["dog", "cat", "bird", "frog", "duck", "fox", "rabbit", "horse"]
FEELINGS = ["happy", "glad", "proud", "calm"]
WEATHER = [
    "The sun was warm.", "It was a windy day.", "The sky was blue.", "It started to rain.",
    "The air was cold.", "The clouds were white.",
]
LETTERS_C = "bdfgklmnprstvz"
LETTERS_V = "aeiou"

# Templated completion families: (name, the words that end the prompt).
# The answer is always " " + a name that the story mentioned earlier.
FAMILIES = ["give_back", "found_for", "thanks"]
# Share of repeated-sequence stories. Copying is learnt late (a "phase change",
# Olsson et al. 2022); a generous share makes it happen within a CPU budget.
REPEAT_FRACTION = 0.3


def made_up_word(rng):
    """A pronounceable nonsense word like 'zup' or 'kelo' (1 or 2 syllables)."""
    n = rng.choice([1, 1, 2])
    word = "".join(rng.choice(LETTERS_C) + rng.choice(LETTERS_V) for _ in range(n))
    if rng.random() < 0.5:
        word += rng.choice(LETTERS_C)
    return word


def two_names(rng):
    a, b = rng.sample(NAMES, 2)
    return a, b


def filler(rng, a, b, place):
    """0-2 neutral sentences, so the answer is not always at the same distance."""
    pool = [
        rng.choice(WEATHER),
        f"A {rng.choice(ANIMALS)} ran past them.",
        f"They saw a {rng.choice(ADJECTIVES)} {rng.choice(ANIMALS)} near the {place}.",
        f"{rng.choice([a, b])} laughed.",
        "They played for a long time.",
        f"The {place} was quiet.",
    ]
    return " ".join(rng.sample(pool, rng.choice([0, 1, 1, 2])))


def story_give_back(rng):
    """A lends an object to B; B gives it back to A. Answer: A (the owner)."""
    a, b = two_names(rng)
    obj, adj, place = rng.choice(OBJECTS), rng.choice(ADJECTIVES), rng.choice(PLACES)
    first, second = (a, b) if rng.random() < 0.5 else (b, a)
    parts = [
        f"Once upon a time, {first} and {second} went to the {place}.",
        f"{a} had a {adj} {obj}.",
        f"{b} liked the {obj} very much.",
        f'"Can I play with your {obj}?" asked {b}.',
        f'"Yes, you can," said {a}.',
        filler(rng, a, b, place),
        f"{b} played with the {obj} all day.",
    ]
    prompt = " ".join(p for p in parts if p) + f" Then {b} gave the {obj} back to"
    answer = f" {a}"
    tail = f". {a} was {rng.choice(FEELINGS)}. The end."
    return prompt, answer, tail


def story_found_for(rng):
    """A loses an object; B finds it and brings it to A. Answer: A (who lost it)."""
    a, b = two_names(rng)
    obj, adj, place = rng.choice(OBJECTS), rng.choice(ADJECTIVES), rng.choice(PLACES)
    first, second = (a, b) if rng.random() < 0.5 else (b, a)
    parts = [
        f"One day, {first} and {second} were at the {place}.",
        f"{a} lost a {adj} {obj}.",
        f"{a} looked everywhere but could not find it.",
        filler(rng, a, b, place),
        f"Then {b} found the {obj} under a tree.",
    ]
    prompt = " ".join(p for p in parts if p) + f' {b} ran to {a} and said, "Here is your {obj},'
    answer = f" {a}"
    tail = f'!" {a} said thank you. The end.'
    return prompt, answer, tail


def story_thanks(rng):
    """B helps A carry something; A thanks B. Answer: B (the helper)."""
    a, b = two_names(rng)
    obj, place = rng.choice(OBJECTS), rng.choice(PLACES)
    first, second = (a, b) if rng.random() < 0.5 else (b, a)
    parts = [
        f"{first} and {second} walked to the {place}.",
        f"{a} had a big box with a {obj} in it.",
        "The box was heavy.",
        f"{b} helped {a} carry the box.",
        filler(rng, a, b, place),
    ]
    prompt = " ".join(p for p in parts if p) + f" {a} smiled and said thank you to"
    answer = f" {b}"
    tail = f". {b} was {rng.choice(FEELINGS)}. The end."
    return prompt, answer, tail


STORY_MAKERS = {"give_back": story_give_back, "found_for": story_found_for, "thanks": story_thanks}


def story_repeat(rng):
    """A made-up word list said twice (sometimes three times): induction food."""
    a, b = two_names(rng)
    words = " ".join(made_up_word(rng) for _ in range(rng.randint(4, 20)))
    text = f"{a} wrote a secret list: {words}. {b} read it again: {words}."
    if rng.random() < 0.5:
        text += f" {a} said it once more: {words}."
    return text + " The end."


def make_story(rng):
    """One story as a single line of text (no newline), plus its completion if any."""
    if rng.random() < REPEAT_FRACTION:
        return story_repeat(rng), None
    family = rng.choice(FAMILIES)
    prompt, answer, tail = STORY_MAKERS[family](rng)
    return prompt + answer + tail, (family, prompt, answer)


def make_split(seed, n_stories):
    """n stories from one seed; returns (texts, completions). Deterministic."""
    rng = random.Random(seed)
    texts, completions = [], []
    for _ in range(n_stories):
        text, comp = make_story(rng)
        texts.append(text)
        if comp is not None:
            completions.append(comp)
    return texts, completions


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stories", type=int, default=10)
    args = ap.parse_args()
    for t in make_split(args.seed, args.stories)[0]:
        print(t)
