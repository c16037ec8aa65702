"""The live appliance: the conversation loop, the assistant that owns devices and engines, the `run` command, the
service glue, metrics, the debug recorder and fault injection for the tests."""
