# Until #47 item 1's scorer is merged: dlib's HOG detector, 5-point landmarks and 128-D embedding, one jitter, over
# the image paths in argv; prints per image the embeddings of its faces, as JSON.
import json
import sys

import dlib
import face_recognition_models as models

detector = dlib.get_frontal_face_detector()
landmarks = dlib.shape_predictor(models.pose_predictor_five_point_model_location())
encoder = dlib.face_recognition_model_v1(models.face_recognition_model_location())
found = []
for path in sys.argv[1:]:
    image = dlib.load_rgb_image(path)
    faces = detector(image, 1)
    found.append([list(encoder.compute_face_descriptor(image, landmarks(image, face), 1)) for face in faces])
print(json.dumps(found))
