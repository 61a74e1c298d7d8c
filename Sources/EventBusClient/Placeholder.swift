// Placeholder: filled in by the EventBusClient work.
