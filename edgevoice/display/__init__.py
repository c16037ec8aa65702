"""The kiosk's screen: the conversation as Server-Sent Events (live captions, state) and the page that shows them
(docs/display.md)."""
