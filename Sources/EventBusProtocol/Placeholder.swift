// Placeholder: filled in by the EventBusProtocol work.
