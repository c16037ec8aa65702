"""edgevoice: an offline voice assistant appliance for kiosks."""

from edgevoice.errors import EdgeVoiceError

__version__ = "0.1.0"

__all__ = ["EdgeVoiceError", "__version__"]
