"""The Wyoming protocol server (docs/wyoming.md): Home Assistant uses the kiosk's recognizer and voice, and sends it
text to speak. The one way into the kiosk from the network besides the admin page; it reaches no action."""
