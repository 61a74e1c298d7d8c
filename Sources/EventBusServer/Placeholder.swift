// Placeholder: filled in by the EventBusServer work.
