"""The kiosk's voice: persona, venue knowledge and the system prompt built from them."""
