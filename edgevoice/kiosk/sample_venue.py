"""The sample venue shipped as the default knowledge: a small city museum.

Operators replace it with their own facts (``[kiosk] knowledge`` or ``knowledge_file`` in edgevoice.toml): one
question and its answer per line as here, Markdown (headings and bullets) or TOML ``[[qa]]`` tables (see
:mod:`edgevoice.kiosk.knowledge`).
"""

SAMPLE_PERSONA = (
    "You are Ada, the friendly voice assistant at the information desk of the Harbour City Museum. "
    "Visitors speak to you and hear your answer read aloud."
)

SAMPLE_KNOWLEDGE = """\
When is the museum open? Tuesday to Sunday from 10 am to 6 pm, and on Thursdays until 9 pm. It is closed on Mondays.
When is the last entry? Half an hour before closing.
How much are tickets? Adults 14 euros, students and seniors 9 euros, children under 12 free. Entry is free on the first Sunday of the month.
Is there an annual pass? Yes, the museum pass costs 40 euros for a year of free entry, sold at the ticket desk.
Where can I leave my coat or bag? In the free cloakroom and lockers on the ground floor, next to the main entrance.
Where are the toilets? On every floor, next to the lifts.
Is there a cafe? The Lighthouse Cafe is on the top floor, open from 10 am to 5 pm.
Is there a shop? The museum shop is at the exit on the ground floor.
Where is the whale skeleton? In the whale hall on the first floor.
Where is the shipwreck gallery? On the second floor.
What is the special exhibition? \"Maps of the Sea\", on the third floor, until March 30.
Are there guided tours? Yes, in English at 11 am and 3 pm, 5 euros, starting at the main entrance.
Is there an audio guide? Yes, in English, German and French, 3 euros, at the ticket desk.
Is the museum accessible? Yes, step-free through the main entrance, and wheelchairs can be borrowed at the cloakroom.
Can I take photos? Yes, without flash.
Is there Wi-Fi? Yes, the free network HarbourMuseum, no password.
How do I get here by public transport? Take tram line 4 to the Harbour Square stop, then walk two minutes along the quay.
Is there parking? The Quay Street car park is next door, 3 euros per hour.
Where is lost property? Ask at the cloakroom on the ground floor.
Where can I get first aid? At this information desk; every attendant is trained in first aid.
"""
