"""The appliance's features wired onto the live loop, one module each, for the composition root (:mod:`edgevoice.app`):
the turn records (:mod:`~edgevoice.wiring.records`), the review inbox (:mod:`~edgevoice.wiring.review`), the actions
and their outbox (:mod:`~edgevoice.wiring.actions`) and the background knowledge compile
(:mod:`~edgevoice.wiring.compiling`). Each follows the loop's bus or the assistant; none imports the root."""
