// Placeholder: filled in by the EventBusSystemd work.
