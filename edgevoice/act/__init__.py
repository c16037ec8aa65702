"""What the kiosk does besides talk: the actions the operator declared (:mod:`.decide`), the durable outbox of their
notifications (:mod:`.outbox`) and their delivery to a webhook, an MQTT broker and the journal (:mod:`.delivery`,
:mod:`.webhook`, :mod:`.mqtt`). docs/actions.md."""
