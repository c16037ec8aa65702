"""The admin page: a small web app (Starlette, served by uvicorn) for the kiosk's operator; see docs/admin.md."""
