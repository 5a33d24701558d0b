// What accelerate and sd-scripts' hook name the files of a state folder; torch.save's archives in the order they
// are written, the random states last.
export const [TRAIN_STATE, MODEL_STATE] = ["train_state.json", "model.safetensors"];
export const TORCH_ARCHIVES = ["optimizer.bin", "scheduler.bin", "random_states_0.pkl"];
