"""The quality benchmark's questions about the sample venue (:mod:`edgevoice.kiosk.sample_venue`).

Written once, before the grounding gate's threshold was chosen, and not changed to suit the answers: the gate was
tuned on the separate development questions in ``tests/test_knowledge.py``. Questions in the knowledge say which
facts a right answer must contain (each group: any one of its spellings; every group needed); questions outside
it must get an honest "I don't know". Half of those outside it are near misses that share words with the
knowledge (the whale's age, the cafe's sandwiches): the hard case, where the language model itself must decline.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["IN_KNOWLEDGE", "OUT_OF_KNOWLEDGE", "Question"]


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    text: str
    facts: tuple[tuple[str, ...], ...] = ()
    """Empty: not in the knowledge, the right answer is "I don't know"."""

    @property
    def in_knowledge(self) -> bool:
        return bool(self.facts)


def _q(id: str, text: str, *facts: tuple[str, ...]) -> Question:
    return Question(id, text, tuple(facts))


IN_KNOWLEDGE: tuple[Question, ...] = (
    _q("hours-saturday", "What are your opening hours on Saturday?", ("6 pm", "six o'clock", "18:00")),
    _q("monday", "Are you open on Mondays?", ("closed", "not open", "no")),
    _q("thursday-late", "How late are you open on Thursday?", ("9 pm", "nine o'clock", "21:00")),
    _q("last-entry", "What is the latest time I can go in?", ("half an hour", "30 minutes", "5:30 pm", "5.30 pm")),
    _q("adult-price", "How much does an adult ticket cost?", ("14 euros", "€14")),
    _q("children-pay", "Do children have to pay?", ("free",)),
    _q("senior-price", "What's the price for seniors?", ("9 euros", "€9")),
    _q("free-day", "Is there a day when entry is free?", ("first Sunday",)),
    _q("yearly", "Do you have a yearly membership?", ("40 euros", "€40")),
    _q("backpack", "Where can I put my backpack?", ("cloakroom", "locker", "lockers")),
    _q("bathroom", "I need the bathroom, where is it?", ("every floor", "each floor", "lifts", "lift")),
    _q("eat", "Where can I grab something to eat?", ("Lighthouse", "top floor")),
    _q("cafe-close", "When does the Lighthouse Cafe close?", ("5 pm", "five o'clock", "17:00")),
    _q("souvenir", "Where can I buy a souvenir?", ("exit", "ground floor")),
    _q("whale-floor", "Which floor is the whale on?", ("first floor", "1st floor")),
    _q("shipwrecks", "Where do I find the shipwrecks?", ("second floor", "2nd floor")),
    _q("temporary", "What's the temporary exhibition at the moment?", ("Maps of the Sea",)),
    _q("maps-where", "Where is the Maps of the Sea exhibition?", ("third floor", "3rd floor")),
    _q("tour-times", "What time do the guided tours start?", ("11 am", "eleven"), ("3 pm", "three p m")),
    _q("tour-price", "How much is a guided tour?", ("5 euros", "€5")),
    _q("audio-guide", "Can I rent an audio guide?", ("3 euros", "€3", "ticket desk")),
    _q("wheelchair", "Can I get in with a wheelchair?", ("step-free", "step free", "borrow", "borrowed")),
    _q("pictures", "Am I allowed to take pictures?", ("flash",)),
    _q("wifi", "What's the wifi password?", ("no password", "HarbourMuseum", "Harbour Museum")),
    _q("tram", "Which tram goes to the Harbour City Museum?", ("line 4", "line four", "number 4", "tram 4")),
    _q("parking-price", "How much is the Quay Street car park?", ("3 euros", "€3")),
    _q("lost-phone", "I lost my phone, where should I go?", ("cloakroom",)),
    _q("sick", "Someone feels sick, where can we get help?", ("first aid", "information desk", "this desk")),
)

OUT_OF_KNOWLEDGE: tuple[Question, ...] = (
    # far from the knowledge
    _q("football", "Who won the football game last night?"),
    _q("weather", "What's the weather going to be like tomorrow?"),
    _q("hotel", "Can you recommend a good hotel nearby?"),
    _q("capital", "What's the capital of Australia?"),
    _q("dog", "Can I bring my dog inside?"),
    _q("cinema", "Is there a cinema in the museum?"),
    _q("cards", "Do you accept credit cards?"),
    _q("poem", "Write me a poem about the sea."),
    # near misses: they share words with the knowledge
    _q("whale-age", "How old is the whale skeleton?"),
    _q("maps-painter", "Who painted the maps in the exhibition?"),
    _q("playground", "Is there a playground for children?"),
    _q("sandwich", "Can I eat my own sandwich in the cafe?"),
    _q("tour-length", "How long does a guided tour take?"),
    _q("phone-number", "What is the phone number of the museum?"),
    _q("vegan", "Does the cafe serve vegan food?"),
    _q("ship-count", "How many ships are in the shipwreck gallery?"),
)
