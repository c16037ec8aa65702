"""The review inbox: the questions the kiosk refused, asked again or answered with a low margin, kept as text for the
operator to attach to an entry, answer in a new one, or dismiss (docs/admin.md, "Review inbox")."""
